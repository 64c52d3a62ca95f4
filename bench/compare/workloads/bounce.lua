-- bounce: Are We Fast Yet's Bounce, 100 rounds of 100 balls x 50 steps, a fresh table per ball per
-- step (see bounce.rmt).
local function next_seed(seed)
  return (seed * 1309 + 13849) % 65536
end

local function bounce(b)
  local x = b.x + b.xv
  local y = b.y + b.yv
  local xv = b.xv
  local yv = b.yv
  local hit = false
  if x > 500 then
    x = 500
    xv = 0 - math.abs(xv)
    hit = true
  end
  if x < 0 then
    x = 0
    xv = math.abs(xv)
    hit = true
  end
  if y > 500 then
    y = 500
    yv = 0 - math.abs(yv)
    hit = true
  end
  if y < 0 then
    y = 0
    yv = math.abs(yv)
    hit = true
  end
  return { x = x, y = y, xv = xv, yv = yv, hit = hit }
end

local function main()
  local seed = 74755
  local bounces = 0
  local checksum = 0
  for round = 0, 100 - 1 do
    local balls = {}
    for i = 0, 100 - 1 do
      seed = next_seed(seed)
      local x = seed % 500
      seed = next_seed(seed)
      local y = seed % 500
      seed = next_seed(seed)
      local xv = seed % 300 - 150
      seed = next_seed(seed)
      local yv = seed % 300 - 150
      local b = { x = x, y = y, xv = xv, yv = yv, hit = false }
      balls[#balls + 1] = b
    end
    for step = 0, 50 - 1 do
      local out = {}
      for k = 1, #balls do
        local nb = bounce(balls[k])
        if nb.hit then
          bounces = bounces + 1
        end
        out[#out + 1] = nb
      end
      balls = out
    end
    for k = 1, #balls do
      local b = balls[k]
      checksum = (checksum * 31 + b.x * 501 + b.y) % 1000000007
    end
  end
  return { bounces = bounces, checksum = checksum }
end

local r = main()
print(string.format('{"bounces": %d, "checksum": %d}', r.bounces, r.checksum))
