# statemachine: a turnstile driven 3 times over 400000 generated string events (see statemachine.rmt).
import json


def next_state(state, ev):
    if state == "locked":
        if ev == "coin":
            return "unlocked"
        elif ev == "kick":
            return "alarm"
        elif ev == "service":
            return "maintenance"
        else:
            return "locked"
    elif state == "unlocked":
        if ev == "push":
            return "open"
        elif ev == "lock":
            return "locked"
        elif ev == "kick":
            return "alarm"
        else:
            return "unlocked"
    elif state == "open":
        if ev == "pass":
            return "unlocked"
        elif ev == "close":
            return "locked"
        elif ev == "kick":
            return "alarm"
        else:
            return "open"
    elif state == "alarm":
        if ev == "reset":
            return "locked"
        elif ev == "service":
            return "maintenance"
        else:
            return "alarm"
    elif state == "maintenance":
        if ev == "done":
            return "locked"
        elif ev == "tick":
            return "maintenance"
        else:
            return "maintenance"
    else:
        return "locked"


def main():
    names = ["coin", "push", "pass", "close", "coin", "push", "pass", "lock", "tick", "tick",
             "reset", "service", "done", "kick", "coin", "push"]
    seed = 42
    events = []
    for i in range(400000):
        seed = seed * 48271 % 2147483647
        events.append(names[seed % 16])
    state = "locked"
    opened = 0
    alarms = 0
    services = 0
    changes = 0
    checksum = 0
    for lap in range(3):
        for ev in events:
            ns = next_state(state, ev)
            if ns != state:
                changes = changes + 1
            if ns == "locked":
                code = 1
            elif ns == "unlocked":
                code = 2
            elif ns == "open":
                code = 3
            elif ns == "alarm":
                code = 4
            elif ns == "maintenance":
                code = 5
            else:
                code = 0
            if ns == "open":
                opened = opened + 1
            elif ns == "alarm":
                alarms = alarms + 1
            elif ns == "maintenance":
                services = services + 1
            checksum = (checksum * 7 + code) % 1000000007
            state = ns
    return {"opened": opened, "alarms": alarms, "services": services, "changes": changes,
            "final": state, "checksum": checksum}


print(json.dumps(main()))
