"""Instruction-following tasks: an exact output format asked of messy input (JSON arrays,
CSV, one id per line, markdown tables, redaction, style rules stated once in a guide).
The reference is the one output that meets every instruction, computed from the input.
"""

from __future__ import annotations

import json
import random

from common import COMPANIES, MONTHS, Task, chatter_line, money, people, person, pick

CLASS = "instruction-following"


def _failing_tests(n: int) -> Task:
    rng = random.Random(f"instr-failing-{n}")
    modules = rng.sample(
        ["test_api", "test_models", "test_billing", "test_auth", "test_export", "test_cache"], 4
    )
    results = []
    for mod in modules:
        for _ in range(rng.randint(4, 9)):
            name = f"tests/{mod}.py::test_{pick(rng, ['create', 'update', 'delete', 'list', 'retry', 'timeout', 'parse', 'render'])}_{rng.randint(1, 99)}"
            results.append((name, rng.choices(["PASSED", "FAILED", "SKIPPED"], [8, 2, 1])[0]))
    results = list(dict(results).items())
    if not any(s == "FAILED" for _, s in results):
        results[0] = (results[0][0], "FAILED")
    lines = [f"{name} {status}" for name, status in results]
    failed = sorted(name for name, s in results if s == "FAILED")
    context = (
        "============================= test session starts ==============================\nplatform linux -- Python 3.11.7, pytest-8.3.2\ncollected {} items\n\n".format(
            len(results)
        )
        + "\n".join(lines)
        + f"\n\n=========== {len(failed)} failed, {sum(s == 'PASSED' for _, s in results)} passed in {rng.uniform(3, 90):.2f}s ==========="
    )
    question = "List the failing tests as a JSON array of strings (their full node ids), sorted alphabetically. Output only the JSON array, nothing else."
    return Task(
        f"instr-gen-failing-{n:02d}",
        CLASS,
        question,
        context,
        json.dumps(failed),
        tags=["json-output", "logs", "pytest", "output-format"],
    )


def _attendees_csv(n: int) -> Task:
    rng = random.Random(f"instr-csv-{n}")
    crew = people(rng, rng.randint(5, 8))
    teams = {p: pick(rng, ["Sales", "Finance", "Engineering", "Legal", "Support"]) for p in crew}
    declined = set(rng.sample(crew, 2))
    lines = []
    for p in crew:
        state = "declined" if p in declined else pick(rng, ["accepted", "accepted", "tentative"])
        lines.append(
            f"{p} ({teams[p]}) — {state}. {chatter_line(rng, ['the workshop', 'the agenda'])}"
        )
    going = sorted(
        (p for p in crew if p not in declined), key=lambda p: p.split()[1] + p.split()[0]
    )
    csv = "last_name,first_name,team\n" + "\n".join(
        f"{p.split()[1]},{p.split()[0]},{teams[p]}" for p in going
    )
    question = "Make a CSV of everyone who has not declined, with the header last_name,first_name,team, sorted by last name (then first name). No quotes, no extra text."
    return Task(
        f"instr-gen-csv-{n:02d}",
        CLASS,
        question,
        "RSVPs for the planning workshop:\n" + "\n".join(lines),
        csv,
        tags=["csv-output", "list-format"],
    )


def _ticket_ids(n: int) -> Task:
    rng = random.Random(f"instr-ids-{n}")
    ids = []
    lines = []
    for _ in range(rng.randint(8, 14)):
        tid = f"{pick(rng, ['ops', 'inc', 'sec'])}-{rng.randint(100, 9999)}"
        prio = pick(rng, ["P1", "P2", "P3", "P4"])
        lines.append(
            f"[{prio}] {tid}: {chatter_line(rng, ['the ticket', 'the customer', 'the outage'])}"
        )
        if prio in ("P1", "P2"):
            ids.append(tid.upper())
    if not ids:
        lines[0] = lines[0].replace(lines[0][:4], "[P1]", 1)
        ids.append(lines[0].split()[1].rstrip(":").upper())
    question = "Give me the IDs of the P1 and P2 tickets only, one per line, in UPPERCASE, in the order they appear. No bullets, no other text."
    return Task(
        f"instr-gen-ids-{n:02d}",
        CLASS,
        question,
        "Open tickets (export):\n" + "\n".join(lines),
        "\n".join(ids),
        tags=["list-format", "ticket", "short"],
    )


def _price_table(n: int) -> Task:
    rng = random.Random(f"instr-table-{n}")
    items = [
        (
            f"{pick(rng, ['Desk', 'Chair', 'Lamp', 'Shelf', 'Monitor arm', 'Footrest', 'Cabinet'])} {pick(rng, ['Pro', 'Lite', 'Max', 'Mini'])} {rng.randint(1, 9)}",
            rng.randint(20, 600),
            rng.choice([True, True, False]),
        )
        for _ in range(rng.randint(6, 9))
    ]
    items = list({name: (name, price, stock) for name, price, stock in items}.values())
    blob = json.dumps(
        [
            {"name": a, "price_eur": p, "in_stock": s, "sku": f"SK{rng.randint(1000, 9999)}"}
            for a, p, s in items
        ],
        indent=1,
    )
    stocked = sorted(((a, p) for a, p, s in items if s), key=lambda x: -x[1])
    table = "| Product | Price |\n|---|---|\n" + "\n".join(f"| {a} | €{p} |" for a, p in stocked)
    question = "Turn this into a markdown table with exactly two columns, Product and Price (formatted like €120), only for items in stock, most expensive first. Output only the table."
    return Task(
        f"instr-gen-table-{n:02d}",
        CLASS,
        question,
        "Catalogue feed:\n" + blob,
        table,
        tags=["json", "table-output", "markdown"],
    )


def _redact(n: int) -> Task:
    rng = random.Random(f"instr-redact-{n}")
    crew = people(rng, 3)
    parts = []
    redacted = []
    for p in crew:
        mail = f"{p.split()[0].lower()}.{p.split()[1].lower()}@{pick(rng, COMPANIES).split()[0].lower()}.example"
        phone = f"+{rng.randint(30, 49)} {rng.randint(100, 999)} {rng.randint(100000, 999999)}"
        sentence = f"{p} can be reached at {mail} or {phone}."
        parts.append(sentence)
        redacted.append(f"{p} can be reached at [EMAIL] or [PHONE].")
    text = " ".join(parts)
    question = "Repeat the contact paragraph exactly, but replace every e-mail address with [EMAIL] and every phone number with [PHONE]. Change nothing else."
    context = f"Internal note ({pick(rng, MONTHS)}): {chatter_line(rng, ['the handover'])}\n\nContact paragraph:\n{text}\n\n{chatter_line(rng, ['the handover'])}"
    return Task(
        f"instr-gen-redact-{n:02d}",
        CLASS,
        question,
        context,
        " ".join(redacted),
        tags=["redaction", "verbatim"],
    )


def _style_guide(n: int) -> Task:
    rng = random.Random(f"instr-style-{n}")
    rules = [
        "Entries start with a verb in the past tense.",
        "Product names are written in bold.",
        "Do not use exclamation marks.",
        "Reference the ticket at the end in parentheses.",
        "Keep each entry under 20 words.",
        "Never mention customers by name.",
    ]
    date_rule = "Dates are always written in ISO 8601 (YYYY-MM-DD)."
    rule_list = rules[:3] + [date_rule] + rules[3:]
    guide = "CHANGELOG STYLE GUIDE\n" + "\n".join(f"{i}. {r}" for i, r in enumerate(rule_list, 1))
    product = pick(rng, ["Ledger", "Beacon", "Atlas"])
    day, month = rng.randint(1, 28), rng.randint(1, 12)
    ticket = f"CHG-{rng.randint(100, 999)}"
    customer = person(rng)
    fix = pick(
        rng,
        [
            "CSV exports cut off after 10,000 rows",
            "the login page timed out on slow networks",
            "invoice PDFs showed the wrong VAT rate",
        ],
    )
    note = f"Dev note: {customer} reported that {fix}. Fixed in {product}, deployed on {day} {MONTHS[month - 1]} 2025. Ticket {ticket}. Great job team!!"
    question = (
        "Write the changelog entry for this fix, following the style guide. Output only the entry."
    )
    reference = (
        f"Fixed a bug where {fix} in **{product}**, deployed 2025-{month:02d}-{day:02d} ({ticket})"
    )
    return Task(
        f"instr-gen-style-{n:02d}",
        CLASS,
        question,
        f"{guide}\n\n{' '.join(chatter_line(rng, ['the release']) for _ in range(3))}\n\n{note}",
        reference,
        tags=["style-rules", "changelog", "fragile:rule-in-middle"],
    )


def _word_limit(n: int) -> Task:
    rng = random.Random(f"instr-words-{n}")
    order = f"#{rng.randint(100000, 999999)}"
    carrier = pick(rng, ["DHL", "UPS", "PostNL"])
    day = rng.randint(2, 28)
    month = pick(rng, MONTHS)
    limit = rng.choice([15, 20, 25])
    log = "\n".join(
        [
            f"{rng.randint(8, 18)}:{rng.randint(10, 59)} status=packed",
            f"{rng.randint(8, 18)}:{rng.randint(10, 59)} status=label_created carrier={carrier}",
            f"{rng.randint(8, 18)}:{rng.randint(10, 59)} status=handed_over eta={day} {month}",
        ]
    )
    question = f"Reply to the customer asking where order {order} is. At most {limit} words, no greeting, mention the carrier and the expected delivery date."
    return Task(
        f"instr-gen-words-{n:02d}",
        CLASS,
        question,
        f"Order {order} event log:\n{log}\n\n{chatter_line(rng, ['the order'])}",
        f"Your order {order} is on its way with {carrier} and should arrive on {day} {month}.",
        tags=["word-limit", "email", "short"],
    )


def _yaml(n: int) -> Task:
    rng = random.Random(f"instr-yaml-{n}")
    svc = pick(rng, ["checkout", "search", "reports", "mailer"])
    replicas = rng.randint(2, 10)
    cpu = pick(rng, ["250m", "500m", "1"])
    mem = pick(rng, ["256Mi", "512Mi", "1Gi"])
    owner = person(rng)
    request = f"Hi platform team, {owner} here. For {svc} we need {replicas} replicas please, CPU limit {cpu}, memory limit {mem}. {chatter_line(rng, ['the launch'])} Thanks!"
    question = "Turn this request into YAML with exactly these keys in this order: service, replicas, limits (with cpu and memory), requested_by. Output only the YAML, no code fence."
    yaml = f'service: {svc}\nreplicas: {replicas}\nlimits:\n  cpu: "{cpu}"\n  memory: {mem}\nrequested_by: {owner}'
    return Task(
        f"instr-gen-yaml-{n:02d}", CLASS, question, request, yaml, tags=["yaml-output", "ticket"]
    )


def tasks() -> list[Task]:
    out: list[Task] = []
    for maker in (
        _failing_tests,
        _attendees_csv,
        _ticket_ids,
        _price_table,
        _redact,
        _style_guide,
        _word_limit,
        _yaml,
    ):
        out += [maker(n) for n in range(1, 6)]
    return out
