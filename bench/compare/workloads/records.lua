-- records: build, map, filter and aggregate 20 x 5000 records as fresh tables (see records.rmt).
local function main()
  local cats = { "tools", "toys", "books", "food", "garden" }
  local kept, grand, tools, books, labels, checksum = 0, 0, 0, 0, 0, 0
  for lap = 0, 20 - 1 do
    local items = {}
    for i = 0, 5000 - 1 do
      local it = {
        id = i,
        name = "item-" .. i,
        category = cats[(i * 7 + lap) % 5 + 1],
        price = (i * 37 + lap * 11) % 1000 + 1,
        qty = (i + lap) % 13,
      }
      items[#items + 1] = it
    end
    local lines = {}
    for k = 1, #items do
      local it = items[k]
      local total = it.price * it.qty
      local discounted
      if total > 5000 then
        discounted = total - total % 100
      else
        discounted = total
      end
      local line = {
        id = it.id,
        label = it.category .. "/" .. it.name,
        category = it.category,
        total = total,
        discounted = discounted,
        bulk = it.qty >= 10,
      }
      lines[#lines + 1] = line
    end
    local chosen = {}
    for k = 1, #lines do
      local l = lines[k]
      if l.bulk and l.category ~= "toys" then
        chosen[#chosen + 1] = l
      end
    end
    for k = 1, #chosen do
      local l = chosen[k]
      grand = grand + l.discounted
      if l.category == "tools" then
        tools = tools + l.total
      elseif l.category == "books" then
        books = books + l.total
      end
      labels = labels + #l.label
    end
    kept = kept + #chosen
    checksum = (checksum * 31 + #chosen + chosen[1].id) % 1000000007
  end
  return { kept = kept, grand = grand, tools = tools, books = books, labels = labels,
    checksum = checksum }
end

local r = main()
print(string.format(
  '{"kept": %d, "grand": %d, "tools": %d, "books": %d, "labels": %d, "checksum": %d}',
  r.kept, r.grand, r.tools, r.books, r.labels, r.checksum))
