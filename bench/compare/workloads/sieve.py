# sieve: the primes below 600000 by trial division with the primes found so far (see sieve.rmt).
import json


def main():
    primes = []
    count = 0
    total = 0
    last = 0
    divisions = 0
    for n in range(600000):
        if n >= 2:
            isprime = True
            for p in primes:
                if p * p > n:
                    break
                divisions = divisions + 1
                if n % p == 0:
                    isprime = False
                    break
            if isprime:
                primes.append(n)
                count = count + 1
                total = total + n
                last = n
    return {"count": count, "sum": total, "last": last, "divisions": divisions}


print(json.dumps(main()))
