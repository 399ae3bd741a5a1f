"""Numeric-reasoning tasks: totals, overtime, budgets, uptime credits, reorder points,
per diems and instalments, computed here from the same numbers the context shows.
"""

from __future__ import annotations

import random

from common import (
    CITIES,
    COMPANIES,
    MONTHS,
    Task,
    chatter_line,
    envelope,
    money,
    people,
    person,
    pick,
)

CLASS = "numeric-reasoning"


def _invoice(n: int) -> Task:
    rng = random.Random(f"num-invoice-{n}")
    items = [
        (
            pick(
                rng,
                [
                    "Consulting hours",
                    "Licence seats",
                    "Training days",
                    "Support plan",
                    "Hardware tokens",
                    "Setup fee",
                ],
            ),
            rng.randint(1, 25),
            rng.randint(4, 90) * 5,
        )
        for _ in range(rng.randint(3, 5))
    ]
    discount = rng.choice([0, 5, 10, 15])
    vat = rng.choice([19, 20, 21, 23])
    subtotal = sum(q * p for _, q, p in items)
    after = subtotal * (100 - discount) / 100
    total = round(after * (100 + vat) / 100, 2)
    lines = "\n".join(
        f"{d:<20} {q:>4} x {money(p, '€'):>10} = {money(q * p, '€'):>12}" for d, q, p in items
    )
    context = f"QUOTE Q-{rng.randint(100, 999)} — {pick(rng, COMPANIES)}\n\n{lines}\n\nTerms: {discount}% discount on the net amount for orders confirmed this month. VAT {vat}% is added after the discount. Prices in EUR."
    return Task(
        f"num-gen-invoice-{n:02d}",
        CLASS,
        "What will the total be including VAT if we confirm this month?",
        envelope(rng, context, ["the quote", "the order", "procurement"]),
        f"Net {money(subtotal, '€')}, minus {discount}% = {money(after, '€')}, plus {vat}% VAT = {money(total, '€')}.",
        tags=["invoice", "pricing"],
    )


def _overtime(n: int) -> Task:
    rng = random.Random(f"num-overtime-{n}")
    who = person(rng)
    rate = rng.choice([18, 22, 25, 31, 40])
    hours = [rng.choice([7.5, 8, 8.5, 9, 9.5, 10, 11]) for _ in range(5)] + [
        rng.choice([0, 0, 4, 5])
    ]
    days = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    total = sum(hours)
    regular = min(total, 40)
    over = max(0.0, total - 40)
    pay = regular * rate + over * rate * 1.5
    context = (
        f"Timesheet export — {who}, week 14 (source: TimeTrack, approved by manager)\n"
        + "\n".join(f"{d}: {h} h" for d, h in zip(days, hours, strict=True))
        + f"\n\nHourly rate: {money(rate)}. Policy: hours above 40 per week are paid at 1.5x. "
        + chatter_line(rng, ["payroll"])
    )
    return Task(
        f"num-gen-overtime-{n:02d}",
        CLASS,
        f"How much is {who.split()[0]} paid for this week?",
        context,
        f"{total:g} hours: 40 regular x {money(rate)} + {over:g} overtime x {money(rate * 1.5)} = {money(pay)}."
        if over
        else f"{total:g} hours, no overtime: {money(pay)}.",
        tags=["timesheet", "short"],
    )


def _budget(n: int) -> Task:
    rng = random.Random(f"num-budget-{n}")
    budget = rng.randint(20, 80) * 1000
    spends = [
        (
            pick(
                rng,
                [
                    "venue deposit",
                    "catering",
                    "AV rental",
                    "printing",
                    "speaker travel",
                    "swag",
                    "photographer",
                ],
            ),
            rng.randint(5, 90) * 50,
        )
        for _ in range(rng.randint(4, 6))
    ]
    refund = rng.randint(2, 20) * 50
    spent = sum(v for _, v in spends)
    left = budget - spent + refund
    crew = people(rng, 3)
    msgs = (
        [f"{crew[0]}: our budget for the offsite is {money(budget)}."]
        + [
            f"{pick(rng, crew)}: paid {money(v)} for the {d}. {chatter_line(rng, ['the offsite'])}"
            for d, v in spends
        ]
        + [f"{crew[1]}: the caterer refunded {money(refund)} because we cut the second lunch."]
    )
    return Task(
        f"num-gen-budget-{n:02d}",
        CLASS,
        "How much of the offsite budget is left?",
        "\n".join(msgs),
        f"{money(budget)} - {money(spent)} spent + {money(refund)} refund = {money(left)} left.",
        tags=["chat-log", "budget", "fragile:buried-number"],
    )


def _uptime(n: int) -> Task:
    rng = random.Random(f"num-uptime-{n}")
    month = pick(rng, ["April", "June", "September", "November"])  # 30-day months
    incidents = [(rng.randint(1, 30), rng.randint(5, 200)) for _ in range(rng.randint(2, 5))]
    down = sum(m for _, m in incidents)
    minutes = 30 * 24 * 60
    uptime = 100 * (minutes - down) / minutes
    credit = 25 if uptime < 99.0 else 10 if uptime < 99.9 else 0
    fee = rng.randint(10, 90) * 100
    context = (
        f"Status history — {month} 2025\n"
        + "\n".join(f"{month} {d}: outage, {m} minutes, all regions" for d, m in incidents)
        + f"\n\nSLA: monthly uptime = (total minutes - outage minutes) / total minutes. Below 99.9% the customer gets a 10% credit on the monthly fee; below 99.0% a 25% credit. Monthly fee: {money(fee)}."
    )
    return Task(
        f"num-gen-uptime-{n:02d}",
        CLASS,
        f"What was the uptime in {month} and what credit are we owed?",
        envelope(rng, context, ["the SLA", "the outage", "the renewal"]),
        f"{down} minutes down of {minutes:,}: uptime {uptime:.3f}%, so the credit is {credit}% = {money(fee * credit / 100)}.",
        tags=["sla", "status-page"],
    )


def _reorder(n: int) -> Task:
    rng = random.Random(f"num-reorder-{n}")
    items = [
        (
            f"{pick(rng, ['Bolt', 'Gasket', 'Filter', 'Valve', 'Sensor', 'Bracket', 'Seal'])} {rng.randint(10, 99)}",
            rng.randint(50, 900),
            rng.randint(5, 60),
            rng.randint(3, 21),
        )
        for _ in range(6)
    ]
    rows = "\n".join(f"| {a} | {s} | {u} | {lt} |" for a, s, u, lt in items)
    need = [a for a, s, u, lt in items if s / u < lt]
    answer = (
        ", ".join(
            f"{a} ({s // u} days of stock, lead time {lt} days)"
            for a, s, u, lt in items
            if s / u < lt
        )
        or "none"
    )
    context = (
        "| Item | On hand | Daily use | Supplier lead time (days) |\n|---|---|---|---|\n"
        + rows
        + "\n\nReorder rule: order now if stock on hand runs out before a new delivery could arrive (on hand / daily use < lead time)."
    )
    return Task(
        f"num-gen-reorder-{n:02d}",
        CLASS,
        "Which items must be reordered today?",
        envelope(rng, context, ["stock levels", "the warehouse", "suppliers"]),
        f"{len(need)} item(s): {answer}.",
        tags=["inventory", "table"],
    )


def _perdiem(n: int) -> Task:
    rng = random.Random(f"num-perdiem-{n}")
    cities = rng.sample(CITIES, 3)
    rates = {c: rng.randint(30, 80) for c in cities}
    nights = [rng.randint(1, 4) for _ in cities]
    total = sum(rates[c] * k for c, k in zip(cities, nights, strict=True))
    total_days = sum(nights) + 1
    travel_day = rates[cities[-1]] * 0.8
    grand = total + travel_day
    context = (
        "Per diem rates (EUR per day):\n"
        + "\n".join(f"- {c}: {r}" for c, r in rates.items())
        + "\n\nItinerary:\n"
        + "\n".join(f"- {k} day(s) in {c}" for c, k in zip(cities, nights, strict=True))
        + f"\n- return trip on day {total_days}\n\nRule: a day counts for the city where you sleep; the return day is paid at 80% of the last city's rate."
    )
    return Task(
        f"num-gen-perdiem-{n:02d}",
        CLASS,
        "What is my total per diem for this trip?",
        envelope(rng, context, ["the trip", "travel policy", "expenses"]),
        f"{' + '.join(f'{k} x {rates[c]}' for c, k in zip(cities, nights, strict=True))} = EUR {total}, plus the return day at 80% of {rates[cities[-1]]} = EUR {travel_day:g}: EUR {grand:g} in total.",
        tags=["travel", "policy"],
    )


def _instalments(n: int) -> Task:
    rng = random.Random(f"num-instalments-{n}")
    price = rng.randint(8, 60) * 100
    down = rng.choice([10, 20, 25])
    months = rng.choice([6, 12, 18, 24])
    fee_pct = rng.choice([0, 3, 5, 8])
    financed = price * (100 - down) / 100
    total_financed = financed * (100 + fee_pct) / 100
    monthly = total_financed / months
    context = f"{pick(rng, COMPANIES)} financing offer\nCash price: {money(price)}\nDown payment: {down}% of the cash price\nThe rest is paid in {months} equal monthly instalments. A one-off financing fee of {fee_pct}% of the financed amount is added to the instalments.\n{chatter_line(rng, ['the offer'])}"
    return Task(
        f"num-gen-instalments-{n:02d}",
        CLASS,
        "How much is each monthly instalment, and what do I pay in total?",
        envelope(rng, context, ["the offer", "financing", "the purchase"]),
        f"Down payment {money(price * down / 100)}; financed {money(financed)} plus {fee_pct}% fee = {money(total_financed)}, i.e. {months} instalments of {money(monthly)}; total paid {money(price * down / 100 + total_financed)}.",
        tags=["pricing", "short"],
    )


def _fx(n: int) -> Task:
    rng = random.Random(f"num-fx-{n}")
    rates = {
        "USD": round(rng.uniform(1.05, 1.15), 4),
        "GBP": round(rng.uniform(0.83, 0.88), 4),
        "CHF": round(rng.uniform(0.93, 0.98), 4),
    }
    expenses = [
        (
            pick(rng, ["hotel", "taxi", "dinner", "train", "conference fee"]),
            pick(rng, list(rates)),
            rng.randint(20, 600),
        )
        for _ in range(rng.randint(3, 5))
    ]
    total = sum(a / rates[c] for _, c, a in expenses)
    month = pick(rng, MONTHS)
    context = (
        f"ECB reference rates, 1 {month} 2025 (1 EUR =): "
        + ", ".join(f"{c} {r}" for c, r in rates.items())
        + "\n\nExpense claim:\n"
        + "\n".join(f"- {d}: {a} {c}" for d, c, a in expenses)
        + "\n\nConvert every item at the reference rate of the first of the month and round the total to the cent."
    )
    return Task(
        f"num-gen-fx-{n:02d}",
        CLASS,
        "What is the claim's total in EUR?",
        envelope(rng, context, ["expenses", "the conference", "reimbursement"]),
        f"EUR {total:,.2f} (" + " + ".join(f"{a} {c} / {rates[c]}" for _, c, a in expenses) + ").",
        tags=["fx", "expenses"],
    )


def tasks() -> list[Task]:
    out: list[Task] = []
    for maker in (_invoice, _overtime, _budget, _uptime, _reorder, _perdiem, _instalments, _fx):
        out += [maker(n) for n in range(1, 6)]
    return out
