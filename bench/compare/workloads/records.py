# records: build, map, filter and aggregate 20 x 5000 records as fresh dicts (see records.rmt).
import json


def main():
    cats = ["tools", "toys", "books", "food", "garden"]
    kept = 0
    grand = 0
    tools = 0
    books = 0
    labels = 0
    checksum = 0
    for lap in range(20):
        items = []
        for i in range(5000):
            it = {
                "id": i,
                "name": f"item-{i}",
                "category": cats[(i * 7 + lap) % 5],
                "price": (i * 37 + lap * 11) % 1000 + 1,
                "qty": (i + lap) % 13,
            }
            items.append(it)
        lines = []
        for it in items:
            total = it["price"] * it["qty"]
            if total > 5000:
                discounted = total - total % 100
            else:
                discounted = total
            line = {
                "id": it["id"],
                "label": f"{it['category']}/{it['name']}",
                "category": it["category"],
                "total": total,
                "discounted": discounted,
                "bulk": it["qty"] >= 10,
            }
            lines.append(line)
        chosen = [l for l in lines if l["bulk"] and l["category"] != "toys"]
        for l in chosen:
            grand = grand + l["discounted"]
            if l["category"] == "tools":
                tools = tools + l["total"]
            elif l["category"] == "books":
                books = books + l["total"]
            labels = labels + len(l["label"])
        kept = kept + len(chosen)
        checksum = (checksum * 31 + len(chosen) + chosen[0]["id"]) % 1000000007
    return {"kept": kept, "grand": grand, "tools": tools, "books": books, "labels": labels,
            "checksum": checksum}


print(json.dumps(main()))
