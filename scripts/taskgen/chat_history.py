"""Chat-history tasks: constraints set in earlier turns (allergies, budgets, time zones,
reversed decisions) decide the answer to the last question about the context.
"""

from __future__ import annotations

import random

from common import CITIES, COMPANIES, Task, money, person, pick, turns

CLASS = "chat-history"


def _menu(n: int) -> Task:
    rng = random.Random(f"chat-menu-{n}")
    allergen = pick(rng, ["nuts", "dairy", "gluten", "shellfish"])
    guests = rng.randint(4, 9)
    more = guests + rng.randint(1, 4)
    dishes = []
    for name in rng.sample(
        [
            "Green curry",
            "Caesar salad",
            "Pad thai",
            "Risotto",
            "Fish tacos",
            "Falafel plate",
            "Lasagne",
            "Poke bowl",
            "Satay skewers",
            "Shrimp linguine",
        ],
        8,
    ):
        contains = set(rng.sample(["nuts", "dairy", "gluten", "shellfish"], rng.randint(0, 2)))
        dishes.append((name, rng.randint(9, 24), contains))
    safe = [d for d in dishes if allergen not in d[2]]
    cheapest = min(safe, key=lambda d: (d[1], d[0]))
    menu = (
        "CATERING MENU (price per person)\n"
        + "\n".join(
            f"- {a} — {money(p, '€')}" + (f" (contains: {', '.join(sorted(c))})" if c else "")
            for a, p, c in dishes
        )
        + "\nDelivery free above €150."
    )
    history = turns(
        f"I'm ordering lunch for my team of {guests}. One of us is allergic to {allergen}, so everyone eats the same dish without {allergen}.",
        f"Got it: one dish for all {guests}, free of {allergen}.",
        f"Update: {more - guests} people from the other office are joining, so it's {more} people.",
        f"Noted, {more} people.",
    )
    question = "Here's the menu. What's the cheapest dish that works for everyone and what does it cost in total?"
    reference = (
        f"{cheapest[0]} is the cheapest dish without {allergen}: {more} x {money(cheapest[1], '€')} = {money(cheapest[1] * more, '€')}"
        + (" (delivery free)." if cheapest[1] * more > 150 else ".")
    )
    return Task(
        f"chat-gen-menu-{n:02d}",
        CLASS,
        question,
        menu,
        reference,
        history=history,
        tags=["menu", "constraints-in-history", "fragile:early-constraint"],
    )


def _flights(n: int) -> Task:
    rng = random.Random(f"chat-flights-{n}")
    origin, dest = rng.sample(CITIES, 2)
    budget = rng.randint(18, 40) * 10
    latest = rng.randint(12, 18)
    options = []
    for i in range(8):
        dep = rng.randint(6, 16)
        arr = dep + rng.randint(2, 5)
        options.append(
            (
                f"{pick(rng, ['LX', 'KL', 'LH', 'TP', 'FR'])}{rng.randint(100, 999)}",
                f"{dep:02d}:{rng.choice(['05', '20', '40'])}",
                f"{arr:02d}:{rng.choice(['00', '15', '45'])}",
                rng.randint(9, 45) * 10,
                rng.choice([0, 0, 1]),
            )
        )
    ok = [o for o in options if int(o[2][:2]) < latest and o[3] <= budget and o[4] == 0]
    history = turns(
        f"I need to fly {origin} to {dest} next Thursday. I must land before {latest}:00 for a meeting.",
        f"Understood: landing before {latest}:00 on Thursday.",
        f"And my company caps flights at {money(budget, '€')}. Direct flights only, I don't want to risk a connection.",
        f"Noted: max {money(budget, '€')}, direct only.",
    )
    table = "| Flight | Departs | Arrives | Price | Stops |\n|---|---|---|---|---|\n" + "\n".join(
        f"| {a} | {b} | {c} | €{d} | {e} |" for a, b, c, d, e in options
    )
    if ok:
        best = min(ok, key=lambda o: (o[3], o[2]))
        reference = f"{best[0]}: departs {best[1]}, arrives {best[2]}, €{best[3]}, direct — the cheapest option that lands before {latest}:00 within the €{budget} cap."
    else:
        reference = (
            f"None: no direct flight both lands before {latest}:00 and costs at most €{budget}."
        )
    return Task(
        f"chat-gen-flights-{n:02d}",
        CLASS,
        "Which of these flights should I book?",
        f"Search results {origin} → {dest}, Thursday:\n{table}",
        reference,
        history=history,
        tags=["travel", "table", "constraints-in-history"],
    )


def _meeting_slot(n: int) -> Task:
    rng = random.Random(f"chat-slot-{n}")
    tz, offset = rng.choice(
        [("New York", -4), ("Chicago", -5), ("Denver", -6), ("Singapore", 8), ("Tokyo", 9)]
    )
    day_off = pick(rng, ["Monday", "Tuesday", "Wednesday"])
    days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
    slots = []
    for d in days:
        for h in sorted(rng.sample(range(7, 19), 3)):
            slots.append((d, h))

    def local(h: int) -> int:
        return h - 2 + offset  # slots are in CEST (UTC+2)

    fits = [(d, h) for d, h in slots if d != day_off and 9 <= local(h) <= 16]
    history = turns(
        f"I'm setting up a call with a client in {tz}. It has to be between 9:00 and 17:00 their time (a 1-hour call).",
        f"Got it: within 9:00-17:00 {tz} time.",
        f"Also I'm off on {day_off}, so not that day.",
        f"Noted, not on {day_off}.",
    )
    context = (
        "My free slots this week (times in CEST, UTC+2; 1-hour slots starting at):\n"
        + "\n".join(f"- {d} {h:02d}:00" for d, h in slots)
    )
    if fits:
        d, h = fits[0]
        reference = f"{d} at {h:02d}:00 CEST, which is {local(h) % 24:02d}:00 in {tz} (UTC{offset:+d}) — the first free slot inside their working hours, and not on {day_off}."
    else:
        reference = f"None of the slots works: none falls within 9:00-17:00 in {tz} on a day other than {day_off}."
    return Task(
        f"chat-gen-slot-{n:02d}",
        CLASS,
        "What's the earliest slot I can offer them?",
        context,
        reference,
        history=history,
        tags=["timezones", "calendar", "constraints-in-history", "fragile:early-turn-fact"],
    )


def _shopping(n: int) -> Task:
    rng = random.Random(f"chat-shopping-{n}")
    prices = {
        i: rng.randint(2, 40) / 2
        for i in [
            "flour",
            "eggs",
            "butter",
            "sugar",
            "milk",
            "cocoa",
            "vanilla",
            "cream",
            "berries",
            "yeast",
        ]
    }
    wanted = rng.sample(list(prices), 5)
    dropped = wanted[2]
    history = turns(
        "I'm baking this weekend. I need " + ", ".join(wanted) + ".",
        "Got it, that's five items.",
        f"Actually scrap the {dropped}, I still have some.",
        f"Okay, {dropped} removed.",
        f"Hmm, I checked and the {dropped} is expired. Put it back on the list please.",
        f"Done, {dropped} is back on.",
    )
    total = sum(prices[i] for i in wanted)
    context = "Corner shop prices today:\n" + "\n".join(
        f"{i}: {money(p, '€')}" for i, p in sorted(prices.items())
    )
    return Task(
        f"chat-gen-shopping-{n:02d}",
        CLASS,
        "What will my shopping cost at these prices?",
        context,
        " + ".join(f"{i} {money(prices[i], '€')}" for i in wanted)
        + f" = {money(total, '€')} ({dropped} is back on the list).",
        history=history,
        tags=["shopping", "constraints-in-history", "fragile:reversed-decision"],
    )


def _refund(n: int) -> Task:
    rng = random.Random(f"chat-refund-{n}")
    order = f"A-{rng.randint(10000, 99999)}"
    orders = []
    for _ in range(6):
        orders.append((f"A-{rng.randint(10000, 99999)}", rng.randint(20, 400), rng.randint(1, 60)))
    days = rng.randint(1, 60)
    price = rng.randint(20, 400)
    orders.insert(rng.randrange(6), (order, price, days))
    fee = 0.0 if days <= 14 else round(price * 0.15, 2) if days <= 30 else None
    history = turns(
        f"Hi, I want to return my headphones, order {order}. They work fine, I just don't like them.",
        "Sorry to hear that. Let me look up your order.",
    )
    policy = "Return policy: change-of-mind returns within 14 days of delivery are refunded in full; days 15-30 incur a 15% restocking fee; after 30 days no change-of-mind returns are accepted. Defective items: full refund within 2 years."
    context = (
        policy
        + "\n\nCustomer's orders (days since delivery):\n"
        + "\n".join(f"{o}: {money(p)} — delivered {d} days ago" for o, p, d in orders)
    )
    if fee is None:
        reference = f"Order {order} was delivered {days} days ago, more than 30, so a change-of-mind return is not accepted (the item is not defective)."
    else:
        reference = (
            f"Order {order} ({money(price)}) was delivered {days} days ago, so the refund is {money(price - fee)}"
            + (f" after a 15% restocking fee of {money(fee)}." if fee else ", in full.")
        )
    return Task(
        f"chat-gen-refund-{n:02d}",
        CLASS,
        "How much can I refund them?",
        context,
        reference,
        system=f"You are a support agent for {pick(rng, COMPANIES)}. Apply the policy exactly.",
        history=history,
        tags=["customer-support", "policy", "constraints-in-history", "fragile:early-turn-fact"],
    )


def _apartments(n: int) -> Task:
    rng = random.Random(f"chat-flats-{n}")
    max_rent = rng.randint(9, 20) * 100
    listings = []
    for i in range(8):
        listings.append(
            (
                f"L{i + 1:02d}",
                rng.randint(7, 24) * 100,
                rng.choice([True, False]),
                rng.randint(0, 6),
                rng.choice([True, False]),
            )
        )
    history = turns(
        f"I'm looking for a flat. Max rent {money(max_rent, '€')} per month, warm.",
        "Okay, I'll filter by that.",
        "I have a dog, so pets must be allowed.",
        "Noted: pets allowed.",
        "And if it's above the 2nd floor it needs a lift, my knee is bad.",
        "Understood: above the 2nd floor only with a lift.",
    )
    ok = [lst for lst in listings if lst[1] <= max_rent and lst[2] and (lst[3] <= 2 or lst[4])]
    context = (
        "| Listing | Rent (warm) | Pets | Floor | Lift |\n|---|---|---|---|---|\n"
        + "\n".join(
            f"| {a} | €{b} | {'yes' if c else 'no'} | {d} | {'yes' if e else 'no'} |"
            for a, b, c, d, e in listings
        )
    )
    reference = (
        ("These fit: " + ", ".join(f"{a} (€{b}, floor {d})" for a, b, c, d, e in ok) + ".")
        if ok
        else "None of the listings meets all three conditions."
    )
    return Task(
        f"chat-gen-flats-{n:02d}",
        CLASS,
        "Which of these listings should I visit?",
        context,
        reference,
        history=history,
        tags=["table", "constraints-in-history"],
    )


def _gift(n: int) -> Task:
    rng = random.Random(f"chat-gift-{n}")
    who = person(rng).split()[0]
    budget = rng.randint(3, 12) * 10
    hobby = pick(rng, ["cooking", "hiking", "reading", "gardening"])
    kinds = {
        "knife set": "cooking",
        "cookbook": "cooking",
        "water bottle": "hiking",
        "headlamp": "hiking",
        "book light": "reading",
        "bookmark set": "reading",
        "trowel set": "gardening",
        "seed kit": "gardening",
    }
    items = []
    for _ in range(9):
        kind = pick(rng, list(kinds))
        items.append(
            (
                f"{pick(rng, ['Deluxe', 'Mini', 'Classic', 'Travel'])} {kind}",
                kinds[kind],
                rng.randint(10, 150),
            )
        )
    items = list({a: (a, b, c) for a, b, c in items}.values())
    history = turns(
        f"Help me pick a birthday gift for {who}. They love {hobby}.",
        f"Sure, something for {hobby}.",
        f"Keep it under €{budget}, it's a colleague.",
        f"Okay, under €{budget}.",
    )
    ok = sorted((i for i in items if i[1] == hobby and i[2] < budget), key=lambda i: -i[2])
    context = "Gift shop catalogue:\n" + "\n".join(f"- {a} ({b}) — €{c}" for a, b, c in items)
    reference = (
        (
            f"{ok[0][0]} (€{ok[0][2]}) is the best {hobby} gift under €{budget}"
            + (
                f"; also within budget: {', '.join(a for a, _, _ in ok[1:])}."
                if len(ok) > 1
                else "."
            )
        )
        if ok
        else f"Nothing in the catalogue is a {hobby} gift under €{budget}."
    )
    return Task(
        f"chat-gen-gift-{n:02d}",
        CLASS,
        "Which of these would you pick?",
        context,
        reference,
        history=history,
        tags=["shopping", "constraints-in-history"],
    )


def _units(n: int) -> Task:
    rng = random.Random(f"chat-units-{n}")
    temp_c = rng.choice([160, 175, 180, 190, 200, 220])
    grams = rng.choice([250, 300, 400, 500])
    history = turns(
        "I'm in the US, so give me everything in Fahrenheit and cups please.",
        "Sure: Fahrenheit and US cups from now on.",
    )
    context = f"Banana bread (one loaf)\n- {grams} g plain flour (1 cup = 125 g)\n- 3 ripe bananas\n- 2 eggs\nBake at {temp_c} °C for 55 minutes."
    f = temp_c * 9 / 5 + 32
    reference = (
        f"{grams / 125:g} cups of flour, 3 bananas, 2 eggs; bake at {f:.0f} °F for 55 minutes."
    )
    return Task(
        f"chat-gen-units-{n:02d}",
        CLASS,
        "Give me the flour amount and oven temperature for this recipe.",
        context,
        reference,
        history=history,
        tags=["recipe", "conversion", "constraints-in-history", "short"],
    )


def tasks() -> list[Task]:
    out: list[Task] = []
    for maker in (_menu, _flights, _meeting_slot, _shopping, _refund, _apartments, _gift, _units):
        out += [maker(n) for n in range(1, 6)]
    return out
