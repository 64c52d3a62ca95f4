-- nbody: 8 bodies, 20000 symplectic Euler steps, a fresh table per body per step (see nbody.rmt).
local function float(i) return i + 0.0 end

-- Remit's int(x): truncation toward zero.
local function int(x)
  if x >= 0 then return math.floor(x) else return math.ceil(x) end
end

local function initial()
  local bodies = {}
  for i = 0, 8 - 1 do
    local b = {
      x = float((i * 37) % 11) - 5.0,
      y = float((i * 53) % 13) - 6.0,
      z = float((i * 29) % 7) - 3.0,
      vx = float((i * 17) % 5) * 0.1 - 0.2,
      vy = float((i * 23) % 7) * 0.1 - 0.3,
      vz = float((i * 31) % 3) * 0.1 - 0.1,
      mass = 1.0 + float(i % 3) * 0.5,
    }
    bodies[#bodies + 1] = b
  end
  return bodies
end

local function step(bodies, dt)
  local out = {}
  for i = 0, 8 - 1 do
    local b = bodies[i + 1]
    local ax = 0.0
    local ay = 0.0
    local az = 0.0
    for j = 0, 8 - 1 do
      if j ~= i then
        local o = bodies[j + 1]
        local dx = o.x - b.x
        local dy = o.y - b.y
        local dz = o.z - b.z
        local d2 = dx * dx + dy * dy + dz * dz + 0.01
        local mag = o.mass / d2
        ax = ax + dx * mag
        ay = ay + dy * mag
        az = az + dz * mag
      end
    end
    local vx = b.vx + dt * ax
    local vy = b.vy + dt * ay
    local vz = b.vz + dt * az
    local nb = {
      x = b.x + dt * vx,
      y = b.y + dt * vy,
      z = b.z + dt * vz,
      vx = vx,
      vy = vy,
      vz = vz,
      mass = b.mass,
    }
    out[#out + 1] = nb
  end
  return out
end

local function main()
  local bodies = initial()
  for s = 0, 20000 - 1 do
    bodies = step(bodies, 0.001)
  end
  local pos = 0.0
  local vel = 0.0
  for k = 1, #bodies do
    local b = bodies[k]
    pos = pos + b.x + b.y + b.z
    vel = vel + b.vx + b.vy + b.vz
  end
  local first_body = bodies[1]
  return {
    pos = int(pos * 1000000000.0),
    vel = int(vel * 1000000000.0),
    x0 = int(first_body.x * 1000000000.0),
  }
end

local r = main()
print(string.format('{"pos": %d, "vel": %d, "x0": %d}', r.pos, r.vel, r.x0))
