-- lists: 3000 rounds of list building, filtering, concatenation and sums (see lists.rmt).

local function sum(xs)
  local s = 0
  for k = 1, #xs do
    s = s + xs[k]
  end
  return s
end

local function maxof(xs)
  local m = xs[1]
  for k = 2, #xs do
    if xs[k] > m then
      m = xs[k]
    end
  end
  return m
end

local function concat(a, b)
  local out = table.move(a, 1, #a, 1, {})
  return table.move(b, 1, #b, #a + 1, out)
end

local function unique(xs)
  local seen, out = {}, {}
  for k = 1, #xs do
    local x = xs[k]
    if not seen[x] then
      seen[x] = true
      out[#out + 1] = x
    end
  end
  return out
end

local function main()
  local total, count, biggest, checksum = 0, 0, 0, 0
  local history = {}
  for r = 0, 3000 - 1 do
    local xs = {}
    for i = 0, 300 - 1 do
      xs[#xs + 1] = (i * 7 + r * 13) % 1000
    end
    local evens = {}
    for k = 1, #xs do
      local x = xs[k]
      if x % 2 == 0 then
        evens[#evens + 1] = x
      end
    end
    local big = {}
    for k = 1, #xs do
      local x = xs[k]
      if x >= 500 then
        big[#big + 1] = x - 500
      end
    end
    local both = concat(evens, big)
    local small = {}
    for k = 1, #both do
      local x = both[k]
      if x < 250 then
        small[#small + 1] = x * 3
      end
    end
    total = total + sum(both) + sum(small)
    count = count + #both + #small
    biggest = math.max(biggest, maxof(both))
    history[#history + 1] = #small
    checksum = (checksum * 31 + #small + both[1]) % 1000000007
  end
  local distinct = #unique(history)
  return { total = total, count = count, biggest = biggest, distinct = distinct, checksum = checksum }
end

local r = main()
print(string.format('{"total": %d, "count": %d, "biggest": %d, "distinct": %d, "checksum": %d}',
  r.total, r.count, r.biggest, r.distinct, r.checksum))
