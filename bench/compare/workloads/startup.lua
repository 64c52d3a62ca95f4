-- startup: a tiny program for timing process start (see startup.rmt).
local total = 0
for i = 0, 10 - 1 do
  total = total + i
end
print(string.format('{"answer": %d}', total - 3))
