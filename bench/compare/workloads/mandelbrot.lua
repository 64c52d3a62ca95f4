-- mandelbrot: escape iterations over a 500 x 500 grid, at most 100 per point (see mandelbrot.rmt).
local function main()
  local iterations, inside, checksum = 0, 0, 0
  for py = 0, 500 - 1 do
    local ci = py * 0.005 - 1.25
    for px = 0, 500 - 1 do
      local cr = px * 0.006 - 2.0
      local x = 0.0
      local y = 0.0
      local n = 0
      for k = 0, 100 - 1 do
        local x2 = x * x
        local y2 = y * y
        if x2 + y2 > 4.0 then
          break
        end
        y = 2.0 * x * y + ci
        x = x2 - y2 + cr
        n = n + 1
      end
      iterations = iterations + n
      if n == 100 then
        inside = inside + 1
      end
      checksum = (checksum * 31 + n) % 1000000007
    end
  end
  return { iterations = iterations, inside = inside, checksum = checksum }
end

local r = main()
print(string.format('{"iterations": %d, "inside": %d, "checksum": %d}',
  r.iterations, r.inside, r.checksum))
