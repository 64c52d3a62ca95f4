-- statemachine: a turnstile driven 3 times over 400000 generated string events (see statemachine.rmt).

local function next_state(state, ev)
  if state == "locked" then
    if ev == "coin" then return "unlocked"
    elseif ev == "kick" then return "alarm"
    elseif ev == "service" then return "maintenance"
    else return "locked" end
  elseif state == "unlocked" then
    if ev == "push" then return "open"
    elseif ev == "lock" then return "locked"
    elseif ev == "kick" then return "alarm"
    else return "unlocked" end
  elseif state == "open" then
    if ev == "pass" then return "unlocked"
    elseif ev == "close" then return "locked"
    elseif ev == "kick" then return "alarm"
    else return "open" end
  elseif state == "alarm" then
    if ev == "reset" then return "locked"
    elseif ev == "service" then return "maintenance"
    else return "alarm" end
  elseif state == "maintenance" then
    if ev == "done" then return "locked"
    elseif ev == "tick" then return "maintenance"
    else return "maintenance" end
  else
    return "locked"
  end
end

local function main()
  local names = { "coin", "push", "pass", "close", "coin", "push", "pass", "lock", "tick", "tick",
    "reset", "service", "done", "kick", "coin", "push" }
  local seed = 42
  local events = {}
  for i = 0, 400000 - 1 do
    seed = seed * 48271 % 2147483647
    events[#events + 1] = names[seed % 16 + 1]
  end
  local state = "locked"
  local opened, alarms, services, changes, checksum = 0, 0, 0, 0, 0
  for lap = 0, 3 - 1 do
    for k = 1, #events do
      local ev = events[k]
      local ns = next_state(state, ev)
      if ns ~= state then
        changes = changes + 1
      end
      local code
      if ns == "locked" then code = 1
      elseif ns == "unlocked" then code = 2
      elseif ns == "open" then code = 3
      elseif ns == "alarm" then code = 4
      elseif ns == "maintenance" then code = 5
      else code = 0 end
      if ns == "open" then
        opened = opened + 1
      elseif ns == "alarm" then
        alarms = alarms + 1
      elseif ns == "maintenance" then
        services = services + 1
      end
      checksum = (checksum * 7 + code) % 1000000007
      state = ns
    end
  end
  return { opened = opened, alarms = alarms, services = services, changes = changes,
    final = state, checksum = checksum }
end

local r = main()
print(string.format(
  '{"opened": %d, "alarms": %d, "services": %d, "changes": %d, "final": "%s", "checksum": %d}',
  r.opened, r.alarms, r.services, r.changes, r.final, r.checksum))
