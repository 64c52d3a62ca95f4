# startup: a tiny program for timing process start (see startup.rmt).
import json

total = 0
for i in range(10):
    total = total + i
print(json.dumps({"answer": total - 3}))
