# lists: 3000 rounds of list building, filtering, concatenation and sums (see lists.rmt).
import json


def unique(xs):
    seen = set()
    out = []
    for x in xs:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def main():
    total = 0
    count = 0
    biggest = 0
    checksum = 0
    history = []
    for r in range(3000):
        xs = [(i * 7 + r * 13) % 1000 for i in range(300)]
        evens = [x for x in xs if x % 2 == 0]
        big = [x - 500 for x in xs if x >= 500]
        both = evens + big
        small = [x * 3 for x in both if x < 250]
        total = total + sum(both) + sum(small)
        count = count + len(both) + len(small)
        biggest = max(biggest, max(both))
        history.append(len(small))
        checksum = (checksum * 31 + len(small) + both[0]) % 1000000007
    distinct = len(unique(history))
    return {"total": total, "count": count, "biggest": biggest, "distinct": distinct,
            "checksum": checksum}


print(json.dumps(main()))
