-- spectralnorm: CLBG spectral-norm, n = 300, 10 power iterations (see spectralnorm.rmt).
-- Remit's int(x): truncation toward zero.
local function int(x)
  if x >= 0 then return math.floor(x) else return math.ceil(x) end
end

local function a(i, j)
  return 1.0 / ((i + j) * (i + j + 1) / 2 + i + 1)
end

local function times(v)
  local out = {}
  for i = 0, 300 - 1 do
    local s = 0.0
    for j = 0, 300 - 1 do
      s = s + a(i, j) * v[j + 1]
    end
    out[#out + 1] = s
  end
  return out
end

local function times_transposed(v)
  local out = {}
  for i = 0, 300 - 1 do
    local s = 0.0
    for j = 0, 300 - 1 do
      s = s + a(j, i) * v[j + 1]
    end
    out[#out + 1] = s
  end
  return out
end

local function times_ata(v)
  return times_transposed(times(v))
end

local function main()
  local u = {}
  for i = 0, 300 - 1 do
    u[#u + 1] = 1.0
  end
  local v = u
  for k = 0, 10 - 1 do
    v = times_ata(u)
    u = times_ata(v)
  end
  local vbv = 0.0
  local vv = 0.0
  for i = 0, 300 - 1 do
    vbv = vbv + u[i + 1] * v[i + 1]
    vv = vv + v[i + 1] * v[i + 1]
  end
  local q = vbv / vv
  local x = 1.0
  for k = 0, 40 - 1 do
    x = (x + q / x) / 2.0
  end
  return { norm = int(x * 1000000000.0), vbv = int(vbv * 1000.0), vv = int(vv * 1000.0) }
end

local r = main()
print(string.format('{"norm": %d, "vbv": %d, "vv": %d}', r.norm, r.vbv, r.vv))
