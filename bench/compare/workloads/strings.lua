-- strings: build, split, join, replace and count 40000 short lines (see strings.rmt).

-- Python's / Remit's split(s, sep) for a non-empty plain separator (Lua has no split).
local function split(s, sep)
  local out = {}
  local start = 1
  while true do
    local a, b = string.find(s, sep, start, true)
    if not a then
      out[#out + 1] = string.sub(s, start)
      return out
    end
    out[#out + 1] = string.sub(s, start, a - 1)
    start = b + 1
  end
end

local function main()
  local pieces, matches, chars, checksum = 0, 0, 0, 0
  for i = 0, 40000 - 1 do
    local line = ""
    for j = 0, 8 - 1 do
      line = line .. "k" .. j .. "=v" .. (i * 7 + j * 13) % 101 .. ";"
    end
    local parts = split(line, ";")
    local joined = table.concat(parts, ", ")
    local pretty = string.gsub(joined, "=", ": ")
    pieces = pieces + #parts
    chars = chars + #pretty
    for k = 1, #parts do
      if string.find(parts[k], "=v1", 1, true) then
        matches = matches + 1
      end
    end
    checksum = (checksum * 31 + #pretty) % 1000000007
  end
  return { pieces = pieces, matches = matches, chars = chars, checksum = checksum }
end

local r = main()
print(string.format('{"pieces": %d, "matches": %d, "chars": %d, "checksum": %d}',
  r.pieces, r.matches, r.chars, r.checksum))
