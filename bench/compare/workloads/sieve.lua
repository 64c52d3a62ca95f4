-- sieve: the primes below 600000 by trial division with the primes found so far (see sieve.rmt).
local function main()
  local primes = {}
  local count, total, last, divisions = 0, 0, 0, 0
  for n = 0, 600000 - 1 do
    if n >= 2 then
      local isprime = true
      for k = 1, #primes do
        local p = primes[k]
        if p * p > n then
          break
        end
        divisions = divisions + 1
        if n % p == 0 then
          isprime = false
          break
        end
      end
      if isprime then
        primes[#primes + 1] = n
        count = count + 1
        total = total + n
        last = n
      end
    end
  end
  return { count = count, sum = total, last = last, divisions = divisions }
end

local r = main()
print(string.format('{"count": %d, "sum": %d, "last": %d, "divisions": %d}',
  r.count, r.sum, r.last, r.divisions))
