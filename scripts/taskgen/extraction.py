"""Extraction tasks: pull exact fields out of mail threads, JSON tool output, logs, tables,
contracts, calendars and cluster dumps. Short answers that a reference metric can grade.
"""

from __future__ import annotations

import json
import random

from common import CITIES, COMPANIES, MONTHS, Task, chatter_line, money, people, person, pick

CLASS = "extraction"


def _shipment(n: int) -> Task:
    rng = random.Random(f"extract-shipment-{n}")
    buyer, seller = people(rng, 2)
    carrier = pick(rng, ["DHL Express", "UPS", "DPD", "FedEx", "GLS"])
    track1 = f"{rng.randint(10, 99)}{rng.randint(10**8, 10**9 - 1)}"
    track2 = f"{rng.randint(10, 99)}{rng.randint(10**8, 10**9 - 1)}"
    day1, day2 = rng.randint(3, 12), rng.randint(13, 26)
    month = pick(rng, MONTHS)
    corrected = n % 2 == 0
    mails = [
        (
            seller,
            f"Your order PO-{rng.randint(1000, 9999)} left our warehouse today with {carrier}, tracking {track1}. Expected delivery {day1} {month}.",
        ),
        (buyer, "Thanks! Could you confirm the pallet count? Our dock needs to know."),
        (seller, f"Two pallets, {rng.randint(300, 900)} kg in total."),
    ]
    if corrected:
        mails.append(
            (
                seller,
                f"Correction: the first label was damaged, the carrier re-labelled the shipment. New tracking number {track2}, and delivery moves to {day2} {month}. Please ignore the earlier number.",
            )
        )
    thread = []
    for who, text in reversed(mails):
        pad = " ".join(
            chatter_line(rng, ["the order", "the invoice", "the dock schedule"])
            for _ in range(rng.randint(2, 5))
        )
        thread.append(
            f"From: {who}\nSubject: RE: Shipment for {pick(rng, COMPANIES)}\n\n{text}\n{pad}\n\nBest regards,\n{who}\n{pick(rng, COMPANIES)} | +{rng.randint(30, 49)} {rng.randint(100, 999)} {rng.randint(1000000, 9999999)}"
        )
    context = "\n\n-----Original Message-----\n".join(thread)
    track, day = (track2, day2) if corrected else (track1, day1)
    return Task(
        f"extract-gen-shipment-{n:02d}",
        CLASS,
        pick(
            rng,
            [
                "What is the current tracking number and expected delivery date?",
                "Give me the carrier, tracking number and delivery date for this shipment.",
            ],
        ),
        context,
        f"{carrier}, tracking number {track}, expected delivery {day} {month}.",
        tags=["email", "quoted-replies"] + (["fragile:correction"] if corrected else []),
    )


def _invoices(n: int) -> Task:
    rng = random.Random(f"extract-invoices-{n}")
    customer = pick(rng, COMPANIES)
    overdue = rng.randrange(5)
    data = []
    for i in range(5):
        total = rng.randint(50, 900) * 10
        paid = total if i != overdue else rng.choice([0, total // 2])
        data.append(
            {
                "number": f"INV-2025-{rng.randint(1000, 9999)}",
                "status": "paid" if paid == total else "open",
                "issue_date": f"2025-0{rng.randint(1, 6)}-{rng.randint(10, 28)}",
                "due_date": f"2025-0{rng.randint(7, 9)}-{rng.randint(10, 28)}",
                "currency": "EUR",
                "total": f"{total:.2f}",
                "amount_paid": f"{paid:.2f}",
                "amount_due": f"{total - paid:.2f}",
                "po_number": f"PO-{rng.randint(10000, 99999)}",
                "lines": [
                    {"sku": f"SKU-{rng.randint(100, 999)}", "quantity": rng.randint(1, 40)}
                    for _ in range(rng.randint(1, 3))
                ],
            }
        )
    context = "Tool call: billing.list_invoices\nTool result:\n" + json.dumps(
        {"customer": customer, "object": "list", "has_more": False, "data": data}, indent=2
    )
    bad = data[overdue]
    return Task(
        f"extract-gen-invoices-{n:02d}",
        CLASS,
        pick(
            rng,
            [
                "Which invoice still has money owed? Give its number, the amount due, the due date and PO number.",
                "Find the unpaid invoice: number, outstanding amount, due date, PO.",
            ],
        ),
        context,
        f"{bad['number']}: EUR {bad['amount_due']} due by {bad['due_date']}, PO {bad['po_number']}.",
        system="You are a billing assistant. Answer from the tool results only.",
        tags=["json", "tool-output"],
    )


def _logs(n: int) -> Task:
    rng = random.Random(f"extract-logs-{n}")
    paths = ["/api/orders", "/api/users", "/api/search", "/api/cart", "/healthz", "/api/payments"]
    target = pick(rng, paths[:4])
    lines = []
    bad_at = rng.randint(30, 85)
    bad = None
    for i in range(rng.randint(90, 170)):
        ip = f"10.{rng.randint(0, 9)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
        rid = "".join(rng.choice("0123456789abcdef") for _ in range(16))
        t = f"2025-03-{rng.randint(10, 11)}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"
        if i == bad_at:
            bad = (ip, rid, t)
            lines.append(
                f'{t} {ip} "POST {target} HTTP/1.1" 502 0 req_id={rid} upstream_time=30.001'
            )
        else:
            status = rng.choice([200, 200, 200, 201, 204, 304, 404])
            lines.append(
                f'{t} {ip} "{pick(rng, ["GET", "POST"])} {pick(rng, paths)} HTTP/1.1" {status} {rng.randint(0, 9000)} req_id={rid} upstream_time={rng.uniform(0.001, 0.9):.3f}'
            )
    assert bad is not None
    return Task(
        f"extract-gen-logs-{n:02d}",
        CLASS,
        pick(
            rng,
            [
                f"One request to {target} failed with a server error. What was its request id, client IP and time?",
                f"Find the 5xx on {target}: req_id, source IP, timestamp.",
            ],
        ),
        "\n".join(lines),
        f"req_id={bad[1]} from {bad[0]} at {bad[2]} (POST {target}, 502 after 30 s upstream).",
        tags=["logs", "repeated-lines", "fragile:near-duplicate-lines"],
    )


def _contract(n: int) -> Task:
    rng = random.Random(f"extract-contract-{n}")
    a, b = rng.sample(COMPANIES, 2)
    notice = rng.choice([30, 60, 90, 120])
    law, venue = rng.choice(
        [
            ("the laws of England and Wales", "London"),
            ("Swiss law", "Zurich"),
            ("the laws of the State of New York", "New York"),
            ("German law", "Munich"),
            ("Dutch law", "Amsterdam"),
        ]
    )
    clauses = [
        "Definitions. Capitalised terms have the meaning given in Schedule 1.",
        "Services. The Supplier shall provide the Services described in the Statement of Work with reasonable skill and care.",
        "Fees. Fees are invoiced monthly in arrears and payable within 30 days of the invoice date.",
        "Confidentiality. Each party shall keep the other's Confidential Information secret for five years after termination.",
        "Liability. Neither party's aggregate liability shall exceed the fees paid in the twelve months preceding the claim.",
        f"Term and termination. This Agreement runs for an initial term of {rng.randint(1, 3)} years and renews automatically for successive one-year terms unless either party gives at least {notice} days' written notice before the end of the then-current term.",
        "Data protection. The parties shall comply with applicable data protection law and the Data Processing Agreement in Schedule 3.",
        "Force majeure. Neither party is liable for delays caused by events beyond its reasonable control.",
        f"Governing law. This Agreement is governed by {law}; the courts of {venue} have exclusive jurisdiction.",
        "Entire agreement. This Agreement supersedes all prior agreements relating to its subject matter.",
    ]
    boiler = " ".join(
        rng.sample(
            [
                "Headings are for convenience only.",
                "Words in the singular include the plural.",
                "Notices must be sent to the addresses in Schedule 2.",
                "No waiver is effective unless in writing.",
                "Each party bears its own costs.",
            ],
            3,
        )
    )
    context = (
        f'MASTER SERVICES AGREEMENT between {a} ("Supplier") and {b} ("Customer")\n\n'
        + "\n\n".join(f"{i}. {c} {boiler}" for i, c in enumerate(clauses, 1))
    )
    return Task(
        f"extract-gen-contract-{n:02d}",
        CLASS,
        "How much notice is needed to stop this contract from renewing, and which law governs it?",
        context,
        f"At least {notice} days' written notice before the end of the current term; governed by {law}, with the courts of {venue} having exclusive jurisdiction.",
        tags=["legal", "boilerplate", "fragile:buried-clause"],
    )


def _orders(n: int) -> Task:
    rng = random.Random(f"extract-orders-{n}")
    cities = rng.sample(CITIES, 8)
    rows = []
    for city in cities:
        rows.append(
            (
                f"SO-{rng.randint(10000, 99999)}",
                person(rng),
                city,
                rng.randint(1, 30),
                money(rng.randint(40, 2000)),
                f"2025-0{rng.randint(1, 9)}-{rng.randint(10, 28)}",
            )
        )
    target = rng.choice(rows)
    table = (
        "| Order | Customer | Ship to | Items | Total | Shipped |\n|---|---|---|---|---|---|\n"
        + "\n".join("| " + " | ".join(map(str, r)) + " |" for r in rows)
    )
    return Task(
        f"extract-gen-orders-{n:02d}",
        CLASS,
        f"Which order was shipped to {target[2]}? Give the order number, customer, total and ship date.",
        f"Weekly shipping report, {pick(rng, COMPANIES)}\n\n{table}\n\nGenerated automatically. Totals include VAT.",
        f"{target[0]} for {target[1]}, total {target[4]}, shipped {target[5]}.",
        tags=["table", "markdown", "short"],
    )


def _calendar(n: int) -> Task:
    rng = random.Random(f"extract-calendar-{n}")
    rooms = ["Atlas", "Birch", "Cedar", "Dune", "Elm"]
    events = []
    for _ in range(rng.randint(12, 20)):
        h = rng.randint(8, 17)
        events.append(
            (
                pick(rng, rooms),
                f"2025-05-{rng.randint(12, 16)}",
                f"{h:02d}:00",
                f"{h + 1:02d}:00",
                person(rng),
                pick(
                    rng,
                    [
                        "1:1",
                        "Planning",
                        "Interview",
                        "Vendor call",
                        "Retro",
                        "Training",
                        "Budget review",
                    ],
                ),
            )
        )
    target = rng.choice(events)
    body = "\n".join(
        f"BEGIN:VEVENT\nDTSTART:{e[1].replace('-', '')}T{e[2].replace(':', '')}00\nDTEND:{e[1].replace('-', '')}T{e[3].replace(':', '')}00\nSUMMARY:{e[5]}\nLOCATION:Room {e[0]}\nORGANIZER;CN={e[4]}:mailto:calendar@example.org\nEND:VEVENT"
        for e in events
    )
    clashes = [e for e in events if e[0] == target[0] and e[1] == target[1] and e[2] == target[2]]
    answer = " and ".join(f"{e[4]} ({e[5]})" for e in clashes)
    return Task(
        f"extract-gen-calendar-{n:02d}",
        CLASS,
        f"Who has room {target[0]} booked on {target[1]} at {target[2]}, and for what?",
        "BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//Rooms//EN\n" + body + "\nEND:VCALENDAR",
        f"Room {target[0]} on {target[1]} {target[2]}-{target[3]}: {answer}.",
        tags=["calendar", "ics"],
    )


def _cluster(n: int) -> Task:
    rng = random.Random(f"extract-cluster-{n}")
    apps = rng.sample(
        ["api", "worker", "web", "scheduler", "billing", "search", "gateway", "notifier"], 5
    )
    blocks = []
    info = {}
    for app in apps:
        tag = f"{rng.randint(1, 4)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
        replicas = rng.randint(1, 12)
        info[app] = (tag, replicas)
        blocks.append(
            f"Name:                   {app}\nNamespace:              prod\nCreationTimestamp:      Tue, {rng.randint(1, 28)} Jan 2025 10:{rng.randint(10, 59)}:00 +0000\n"
            f"Selector:               app={app}\nReplicas:               {replicas} desired | {replicas} updated | {replicas} total | {replicas} available | 0 unavailable\n"
            f"StrategyType:           RollingUpdate\nPod Template:\n  Containers:\n   {app}:\n    Image:      registry.internal/{app}:{tag}\n    Port:       {rng.choice([8080, 8000, 9000])}/TCP\n"
            f"    Limits:\n      cpu:     {rng.choice(['500m', '1', '2'])}\n      memory:  {rng.choice(['512Mi', '1Gi', '2Gi'])}\nEvents:  <none>"
        )
    target = pick(rng, apps)
    return Task(
        f"extract-gen-cluster-{n:02d}",
        CLASS,
        f"Which image tag is the {target} deployment running, and how many replicas does it have?",
        "$ kubectl describe deployments -n prod\n\n" + "\n\n\n".join(blocks),
        f"{target} runs registry.internal/{target}:{info[target][0]} with {info[target][1]} replica(s).",
        tags=["kubernetes", "tool-output", "fragile:near-duplicate-lines"],
    )


def _contacts(n: int) -> Task:
    rng = random.Random(f"extract-contacts-{n}")
    crew = people(rng, 5)
    titles = rng.sample(
        [
            "Head of Procurement",
            "CFO",
            "IT Security Lead",
            "Account Executive",
            "Office Manager",
            "Legal Counsel",
        ],
        5,
    )
    phones = [
        f"+{rng.randint(31, 49)} {rng.randint(10, 99)} {rng.randint(100, 999)} {rng.randint(1000, 9999)}"
        for _ in crew
    ]
    blocks = []
    for i, who in enumerate(crew):
        blocks.append(
            f"On {rng.randint(1, 28)} {pick(rng, MONTHS)}, {who} wrote:\n> {chatter_line(rng, ['the renewal', 'the security questionnaire', 'the contract draft'])}\n> --\n> {who} | {titles[i]} | {pick(rng, COMPANIES)}\n> Mobile {phones[i]}"
        )
    t = rng.randrange(5)
    return Task(
        f"extract-gen-contacts-{n:02d}",
        CLASS,
        f"What is the {titles[t]}'s name and mobile number?",
        "Forwarding the whole thread so you have everyone's details.\n\n" + "\n\n".join(blocks),
        f"{crew[t]}, mobile {phones[t]}.",
        tags=["email", "signatures", "short"],
    )


def tasks() -> list[Task]:
    out: list[Task] = []
    for maker in (_shipment, _invoices, _logs, _contract, _orders, _calendar, _cluster, _contacts):
        out += [maker(n) for n in range(1, 6)]
    return out
