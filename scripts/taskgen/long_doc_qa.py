"""Long-document questions: manuals, handbooks, API references (10k-30k tokens), and
shorter leases, datasheets and calls for proposals.

Every document is assembled from seeded tables; one row or clause answers the question,
and the reference is read from the same table, so it is the one correct answer.

Why one module past 400 lines: most of it is the written material (phrases, clauses,
turns of talk) the documents are assembled from, kept beside the one generator that uses it.
"""

from __future__ import annotations

import random

from common import COMPANIES, MONTHS, Task, money, person, pick

CLASS = "long-doc-qa"

PROSE = [
    "Read this section completely before you start, and keep the manual with the unit.",
    "Only qualified personnel should carry out the steps marked with a wrench symbol.",
    "Disconnect the power supply before opening any cover; capacitors may hold a charge for up to five minutes.",
    "Use only original spare parts; third-party parts void the warranty described in the last chapter.",
    "The figures in this section are indicative; see the technical data table for binding values.",
    "If the unit has been stored below freezing, let it reach room temperature for at least two hours first.",
    "Keep the ventilation openings free; a blocked inlet raises internal temperature and shortens component life.",
    "Settings changed here are stored immediately and survive a power cut.",
    "The display returns to the home screen after sixty seconds without input.",
    "Cleaning agents containing solvents can damage the front panel; use a damp cloth only.",
    "Record every maintenance step in the service log at the back of this manual.",
    "In case of doubt, contact your authorised service partner before continuing.",
    "The default values shown apply to units shipped after the firmware update described in the appendix.",
    "Local regulations may require additional protective equipment; they take precedence over this manual.",
]
ERRORS = [
    (
        "Inlet pressure too low",
        "Check that the supply valve is fully open and the inlet filter is clean.",
    ),
    (
        "Outlet temperature sensor open circuit",
        "Check the sensor plug on the main board; replace the sensor if the fault persists.",
    ),
    (
        "Fan speed below threshold",
        "Remove dust from the fan guard; if the code returns within 24 h, replace the fan.",
    ),
    (
        "Communication lost with display board",
        "Power-cycle the unit; check the ribbon cable between boards.",
    ),
    ("Water detected in drip tray", "Empty the drip tray and check the drain hose for kinks."),
    (
        "Overcurrent on compressor",
        "Switch off for 30 minutes; if it repeats, call service — do not reset more than twice.",
    ),
    ("Door open too long", "Close the door; the alarm stops automatically."),
    (
        "Firmware checksum mismatch",
        "Reinstall the firmware from a USB stick; see the firmware appendix.",
    ),
    ("Supply voltage out of range", "Measure the mains voltage; the unit needs 207-253 V."),
    (
        "Filter service interval exceeded",
        "Replace the filter cartridge and reset the counter in the service menu.",
    ),
    (
        "Heating element does not reach set point",
        "Check the fuse F3; replace the element if the fuse is intact.",
    ),
    (
        "Flow sensor reports no flow",
        "Bleed air from the circuit using the bleed screw on the pump housing.",
    ),
    ("Real-time clock battery low", "Replace the CR2032 cell behind the display cover."),
    (
        "Internal temperature above 70 °C",
        "Let the unit cool down and clear the ventilation openings.",
    ),
    ("Drain pump blocked", "Unscrew the pump cover and remove debris."),
    (
        "Pressure switch stuck closed",
        "Replace the pressure switch; the unit runs in limited mode meanwhile.",
    ),
]
PARTS = [
    "pre-filter",
    "carbon filter",
    "drive belt",
    "door seal",
    "UV lamp",
    "pump membrane",
    "air filter",
    "descaling cartridge",
    "fan bearing",
    "valve seat",
]


LEGAL = [
    "The Tenant shall treat the premises with care and ventilate and heat them adequately.",
    "Structural alterations require the Landlord's prior written consent.",
    "The Landlord may enter the premises after reasonable notice to inspect them or to carry out necessary repairs.",
    "Keys handed over are listed in the handover protocol; lost keys are replaced at the Tenant's expense.",
    "The Tenant shall report defects to the Landlord without undue delay.",
    "Shared areas must be kept clear; items left there may be removed after notice.",
    "Waste must be separated according to the municipal rules posted in the entrance hall.",
    "Any notice under this agreement must be given in writing to the address stated above.",
    "Verbal side agreements have not been made.",
    "The Tenant's household contents insurance is recommended but not required.",
]
GRANT = [
    "Proposals are assessed by at least three independent experts.",
    "Projects should show a clear benefit beyond the applicant organisation.",
    "Open licences for results are strongly encouraged and weigh in the evaluation.",
    "Costs incurred before the start date of the grant agreement are not eligible.",
    "Applicants may submit only one proposal as coordinator per call.",
    "The programme office answers questions until one week before the deadline.",
    "Personal data in proposals is processed only for evaluation and monitoring.",
    "Successful applicants report on progress every six months.",
    "Subcontracting is limited to 30 % of eligible costs.",
    "Equipment purchases are eligible only in proportion to their use in the project.",
]


def _paras(rng: random.Random, k: int, pool: list[str] = PROSE) -> str:
    return "\n\n".join(" ".join(rng.sample(pool, 4)) for _ in range(k))


def _manual(n: int) -> Task:
    rng = random.Random(f"ldqa-manual-{n}")
    maker = pick(rng, COMPANIES)
    model = f"{pick(rng, ['AQ', 'TX', 'HV', 'RX', 'PL'])}-{rng.randint(2, 9)}{rng.randint(0, 9)}0"
    codes = list(range(1, len(ERRORS) + 1))
    prefix = pick(rng, ["E", "F", "ERR-"])
    table_codes = {f"{prefix}{rng.randint(1, 9)}{i:02d}": ERRORS[i - 1] for i in codes}
    parts = rng.sample(PARTS, 7)
    intervals = {
        p: (rng.choice([3, 6, 12, 18, 24]), f"{rng.randint(100, 999)}-{rng.randint(1000, 9999)}")
        for p in parts
    }
    sections = [
        f"{maker} {model} — Installation, Operation and Maintenance Manual\nDocument {rng.randint(1000, 9999)}-{pick(rng, ['A', 'B', 'C'])}, edition {pick(rng, MONTHS)} 2024\n"
    ]
    chapters = [
        "Safety",
        "Scope of delivery",
        "Technical data",
        "Installation",
        "Commissioning",
        "Operation",
        "Settings menu",
        "Cleaning",
        "Maintenance",
        "Fault codes",
        "Troubleshooting",
        "Firmware",
        "Disposal",
        "Warranty",
    ]
    for number, title in enumerate(chapters, 1):
        body = _paras(rng, rng.randint(8, 16))
        if title == "Technical data":
            rows = [
                ("Rated power", f"{rng.randint(4, 30) * 100} W"),
                ("Weight", f"{rng.randint(12, 80)} kg"),
                ("Noise level", f"{rng.randint(38, 62)} dB(A)"),
                ("Operating temperature", f"{rng.randint(2, 10)}-{rng.randint(32, 45)} °C"),
                ("Protection class", pick(rng, ["IP44", "IP54", "IPX4"])),
            ]
            body = (
                "| Parameter | Value |\n|---|---|\n"
                + "\n".join(f"| {a} | {b} |" for a, b in rows)
                + "\n\n"
                + body
            )
        if title == "Maintenance":
            body += (
                "\n\nMaintenance schedule:\n| Part | Interval (months) | Part number |\n|---|---|---|\n"
                + "\n".join(f"| {p} | {iv} | {pn} |" for p, (iv, pn) in intervals.items())
            )
        if title == "Fault codes":
            body = (
                "| Code | Meaning | What to do |\n|---|---|---|\n"
                + "\n".join(f"| {c} | {m} | {a} |" for c, (m, a) in table_codes.items())
                + "\n\n"
                + body
            )
        sections.append(f"{number}. {title.upper()}\n\n{body}")
    revised = n % 2 == 0
    part = parts[rng.randrange(len(parts))]
    old_iv, pn = intervals[part]
    new_iv = max(1, old_iv // 2) if old_iv > 1 else 1
    if revised:
        sections.append(
            f"APPENDIX R — REVISION NOTES\n\nRevision {pick(rng, ['C', 'D'])}: field data showed early wear. The replacement interval for the {part} is shortened from {old_iv} to {new_iv} months for all units; the part number is unchanged. All other intervals stay as listed in chapter 9.\n\n"
            + _paras(rng, 2)
        )
    doc = "\n\n".join(sections)
    doc = "\n\n".join([doc] * 1)
    if n % 3 == 1:
        code, (meaning, action) = rng.choice(list(table_codes.items()))
        question = pick(
            rng,
            [
                f"My {model} shows {code} on the display. What does it mean and what should I do?",
                f"What is fault {code} on the {model}, and how do I clear it?",
            ],
        )
        reference = f'{code} means "{meaning}". {action}'
        tags = ["manual", "table", "long"]
    else:
        iv = new_iv if revised else old_iv
        question = pick(
            rng,
            [
                f"How often do I have to replace the {part} on the {model}, and what is the part number?",
                f"What's the replacement interval and part number for the {part}?",
            ],
        )
        reference = f"Every {iv} months, part number {pn}." + (
            f" (The revision notes shortened it from {old_iv} months.)" if revised else ""
        )
        tags = ["manual", "table", "long"] + (
            ["fragile:superseded-clause"] if revised else ["fragile:buried-number"]
        )
    return Task(f"ldqa-gen-manual-{n:02d}", CLASS, question, doc, reference, tags=tags)


POLICIES = [
    (
        "Annual leave",
        "Full-time employees receive {a} days of paid annual leave per calendar year; up to {b} unused days may be carried over to the following year.",
    ),
    (
        "Parental leave",
        "Employees with at least {c} months of service receive {a} weeks of fully paid parental leave, to be taken within {b} months of the birth or adoption.",
    ),
    (
        "Remote work",
        "Employees may work remotely up to {a} days per week; working from another country requires approval and is limited to {b} days per year.",
    ),
    (
        "Expenses",
        "Meals on business travel are reimbursed up to {m} per day; receipts are required for any item over {m2}.",
    ),
    (
        "Equipment",
        "Each employee receives a home-office allowance of {m} once, and a replacement laptop every {a} years.",
    ),
    (
        "Sick leave",
        "A doctor's note is required from the {a}th consecutive day of illness; up to {b} days per year are paid at 100%.",
    ),
    (
        "Training",
        "Every employee has a training budget of {m} per year and {a} paid training days.",
    ),
    (
        "Notice periods",
        "During probation the notice period is {a} weeks for both sides; afterwards it is {b} months to the end of a month.",
    ),
    (
        "On-call",
        "On-call weeks are compensated with {m} per week plus time off in lieu of {a} hours per night incident.",
    ),
    (
        "Referral bonus",
        "A successful referral earns {m}, paid after the new hire completes {a} months.",
    ),
]


def _fill(rng: random.Random, text: str) -> tuple[str, dict[str, str]]:
    values = {
        "a": str(rng.randint(2, 30)),
        "b": str(rng.randint(2, 12)),
        "c": str(rng.randint(3, 12)),
        "m": money(rng.randint(20, 250) * 10, "€"),
        "m2": money(rng.randint(2, 9) * 10, "€"),
    }
    return text.format(**values), values


def _handbook(n: int) -> Task:
    rng = random.Random(f"ldqa-handbook-{n}")
    company = pick(rng, COMPANIES)
    chosen = rng.sample(POLICIES, 8)
    target = rng.randrange(len(chosen))
    sections = [
        f"{company} — Employee Handbook (version {rng.randint(3, 9)}.{rng.randint(0, 9)})\n"
    ]
    facts: dict[str, tuple[str, dict[str, str]]] = {}
    for number, (title, template) in enumerate(chosen, 1):
        text, values = _fill(rng, template)
        facts[title] = (text, values)
        filler = "\n\n".join(
            " ".join(
                rng.sample(
                    [
                        f"This policy applies to all employees of {company} and its subsidiaries unless a works agreement says otherwise.",
                        "Managers are responsible for applying it consistently within their teams.",
                        "Questions about this policy go to the People team via the internal help desk.",
                        "Exceptions must be approved in writing by the department head and People team.",
                        "Part-time employees receive the entitlement pro rata to their contractual hours.",
                        "The policy is reviewed every year; the current version is always the one on the intranet.",
                        "Where local law grants more, local law applies.",
                        "Requests are made in the HR system at least two weeks in advance where possible.",
                        "Abuse of this policy may lead to disciplinary action under section 14.",
                        "Time spent travelling is not counted as working time unless it falls within normal hours.",
                    ],
                    5,
                )
            )
            for _ in range(rng.randint(13, 24))
        )
        sections.append(f"## {number}. {title}\n\n{text}\n\n{filler}")
    title, (text, values) = list(facts.items())[target]
    amended = n % 2 == 1
    template = dict(chosen)[title]
    new_text, _ = _fill(rng, template)
    if amended:
        sections.append(
            f'## Amendments\n\nAmendment {rng.randint(1, 4)} (effective 1 {pick(rng, MONTHS)} 2025): the first paragraph of section "{title}" now reads: "{new_text}" All other provisions of that section are unchanged.'
        )
    answer_text = new_text if amended else text
    question = {
        "Annual leave": "How many days of paid annual leave do full-time employees get, and how many can be carried over?",
        "Parental leave": "How many weeks of paid parental leave are there, and who qualifies?",
        "Remote work": "How many days a week can I work remotely, and how long can I work from abroad?",
        "Expenses": "What's the daily meal limit on business trips, and when do I need receipts?",
        "Equipment": "What home-office allowance do we get, and how often is the laptop replaced?",
        "Sick leave": "From which day of sick leave do I need a doctor's note, and how many days are fully paid?",
        "Training": "What training budget and how many training days does each employee get?",
        "Notice periods": "What is the notice period during probation and after it?",
        "On-call": "How is an on-call week compensated?",
        "Referral bonus": "How much is the referral bonus and when is it paid?",
    }[title]
    reference = (
        f'Per the handbook\'s "{title}" section{" as amended" if amended else ""}: {answer_text}'
    )
    tags = ["policy", "markdown", "long"] + (
        ["fragile:superseded-clause", "amendments"] if amended else []
    )
    return Task(
        f"ldqa-gen-handbook-{n:02d}", CLASS, question, "\n\n".join(sections), reference, tags=tags
    )


RESOURCES = [
    "invoices",
    "customers",
    "shipments",
    "webhooks",
    "users",
    "projects",
    "reports",
    "payments",
    "refunds",
    "subscriptions",
    "events",
    "files",
    "teams",
    "audit-logs",
    "api-keys",
    "exports",
    "imports",
    "tags",
    "notes",
    "alerts",
]


def _api(n: int) -> Task:
    rng = random.Random(f"ldqa-api-{n}")
    vendor = pick(rng, COMPANIES).split()[0]
    chosen = rng.sample(RESOURCES, 16)
    rows = {}
    parts = [
        f"# {vendor} REST API reference (v{rng.randint(2, 4)})\n\nBase URL: https://api.{vendor.lower()}.example/v2\nAll requests need `Authorization: Bearer <token>`. Timestamps are RFC 3339 in UTC.\n"
    ]
    for res in chosen:
        for verb, path, action in (
            ("GET", f"/{res}", "List"),
            ("POST", f"/{res}", "Create"),
            ("GET", f"/{res}/{{id}}", "Retrieve"),
            ("DELETE", f"/{res}/{{id}}", "Delete"),
        ):
            limit = rng.choice([10, 20, 30, 60, 100, 120, 300, 600])
            scope = f"{res.replace('-', '_')}:{'read' if verb == 'GET' else 'write'}"
            page = rng.choice([50, 100, 200, 250, 500, 1000]) if action == "List" else None
            rows[(verb, path)] = (limit, scope, page)
            params = "\n".join(
                f"| `{p}` | {t} | {d} |"
                for p, t, d in rng.sample(
                    [
                        (
                            "limit",
                            "integer",
                            f"Page size, at most {page}." if page else "Not used.",
                        ),
                        ("cursor", "string", "Opaque cursor from the previous page."),
                        ("created_after", "timestamp", "Only objects created after this time."),
                        ("expand", "array", "Related objects to include inline."),
                        ("status", "enum", "Filter by status."),
                        ("metadata", "object", "Up to 20 key-value pairs."),
                        ("idempotency_key", "string", "Makes a retried POST safe."),
                    ],
                    4,
                )
            )
            parts.append(
                f"## {action} {res}\n\n`{verb} {path}`\n\nRequired scope: `{scope}`. Rate limit: {limit} requests per minute per token."
                + (f" Maximum page size: {page}." if page else "")
                + f"\n\n| Parameter | Type | Description |\n|---|---|---|\n{params}\n\n"
                + "Errors: `400` invalid parameters, `401` missing or bad token, `403` missing scope, `404` unknown id, `429` rate limit (see `Retry-After`).\n\n"
                + 'Example response:\n```json\n{"object": "'
                + res.rstrip("s")
                + '", "id": "'
                + res[:3]
                + "_"
                + "".join(rng.choice("abcdef0123456789") for _ in range(12))
                + '", "created": "2025-0'
                + str(rng.randint(1, 9))
                + "-1"
                + str(rng.randint(0, 9))
                + 'T10:00:00Z", "livemode": false}\n```'
            )
    (verb, path), (limit, scope, page) = rng.choice(
        [(k, v) for k, v in rows.items() if k[0] == "GET" and v[2]]
    )
    question = pick(
        rng,
        [
            f"What scope do I need for `{verb} {path}`, what's its rate limit and the largest page I can request?",
            f"For listing {path.strip('/')} via the API: required scope, requests per minute, max page size?",
        ],
    )
    reference = f"`{verb} {path}` needs the `{scope}` scope, is limited to {limit} requests per minute per token, and returns at most {page} items per page."
    return Task(
        f"ldqa-gen-api-{n:02d}",
        CLASS,
        question,
        "\n\n".join(parts),
        reference,
        tags=["docs", "api", "markdown", "code", "long", "fragile:near-duplicate-lines"],
    )


def _lease(n: int) -> Task:
    rng = random.Random(f"ldqa-lease-{n}")
    landlord, tenant = person(rng), person(rng)
    rent = rng.randint(70, 260) * 10
    deposit_months = rng.choice([1, 2, 3])
    notice = rng.choice([1, 2, 3])
    pets = pick(
        rng,
        [
            "Cats and small caged animals are allowed; dogs need the landlord's written consent.",
            "No pets of any kind are allowed, except assistance animals.",
            "One dog or one cat is allowed after a one-off cleaning fee of €250 is paid.",
        ],
    )
    clauses = [
        (
            "Parties",
            f"This agreement is made between {landlord} (the Landlord) and {tenant} (the Tenant).",
        ),
        (
            "Premises",
            f"The flat at {rng.randint(1, 120)} {pick(rng, ['Linden', 'Harbour', 'Mill', 'Station'])} Street, unit {rng.randint(1, 40)}, including one cellar compartment.",
        ),
        (
            "Rent",
            f"The monthly rent is €{rent:,}, payable in advance by the third working day of each month.",
        ),
        (
            "Deposit",
            f"The Tenant pays a deposit of {deposit_months} month(s)' rent, i.e. €{rent * deposit_months:,}, returned within 60 days of the end of the tenancy less any justified deductions.",
        ),
        (
            "Utilities",
            "Heating and water are billed as monthly advances of €{0} with an annual settlement.".format(
                rng.randint(60, 180)
            ),
        ),
        (
            "Termination",
            f"Either party may terminate with {notice} month(s)' notice to the end of a calendar month, in writing.",
        ),
        ("Pets", pets),
        ("Repairs", "Minor repairs up to €100 per case and €400 per year are borne by the Tenant."),
        (
            "Subletting",
            "Subletting requires the Landlord's prior written consent, which may not be unreasonably withheld.",
        ),
        (
            "House rules",
            "Quiet hours are 22:00-07:00. Bicycles belong in the bicycle room, not in the stairwell.",
        ),
    ]
    boiler = "The parties agree that any amendment to this agreement must be in writing. Should a provision be invalid, the remainder stays in force. "
    text = "RESIDENTIAL LEASE AGREEMENT\n\n" + "\n\n".join(
        f"§{i} {t}\n{c} {boiler * rng.randint(1, 3)}\n{_paras(rng, rng.randint(2, 4), LEGAL)}"
        for i, (t, c) in enumerate(clauses, 1)
    )
    which = n % 3
    if which == 0:
        q, r = (
            "How much is the deposit and when do I get it back?",
            f"€{rent * deposit_months:,} ({deposit_months} month(s)' rent), returned within 60 days after the tenancy ends, less justified deductions.",
        )
    elif which == 1:
        q, r = (
            "If I want to move out, how much notice do I have to give?",
            f"{notice} month(s)' notice, in writing, to the end of a calendar month.",
        )
    else:
        q, r = "Can I keep a dog in this flat?", pets
    return Task(
        f"ldqa-gen-lease-{n:02d}", CLASS, q, text, r, tags=["legal", "contract", "boilerplate"]
    )


def _datasheet(n: int) -> Task:
    rng = random.Random(f"ldqa-datasheet-{n}")
    family = f"{pick(rng, ['LMX', 'TPS', 'QRD', 'NVA'])}{rng.randint(10, 99)}"
    variants = [f"{family}{s}" for s in ("A", "B", "C", "D", "E")]
    specs = {
        v: (
            rng.choice([0.5, 1, 1.5, 2, 3, 5]),
            rng.choice([3.3, 5, 12, 24]),
            rng.randint(-40, 0),
            rng.choice([85, 105, 125]),
        )
        for v in variants
    }
    rows = "\n".join(
        f"| {v} | {a} A | {u} V | {lo} to {hi} °C |" for v, (a, u, lo, hi) in specs.items()
    )
    text = (
        f"{family} series — DC/DC step-down regulator\n\nFEATURES\n- Wide input range\n- Thermal shutdown\n- Soft start\n\n"
        + "ABSOLUTE MAXIMUM RATINGS apply to all variants: input voltage 40 V, junction temperature 150 °C. Stresses beyond these may cause permanent damage.\n\n"
        + "| Variant | Max output current | Output voltage | Operating temperature |\n|---|---|---|---|\n"
        + rows
        + "\n\n"
        + _paras(rng, rng.randint(20, 40))
        + "\n\nNote 3: for the "
        + variants[2]
        + " the maximum output current is derated by 50 % above 85 °C."
    )
    v = variants[n % 5]
    a, u, lo, hi = specs[v]
    ref = f"The {v} delivers up to {a} A at {u} V, and operates from {lo} to {hi} °C." + (
        " Above 85 °C its maximum current is derated by 50 % (note 3)." if v == variants[2] else ""
    )
    return Task(
        f"ldqa-gen-datasheet-{n:02d}",
        CLASS,
        f"What is the maximum output current and operating temperature range of the {v}?",
        text,
        ref,
        tags=["datasheet", "table"] + (["fragile:footnote"] if v == variants[2] else []),
    )


def _cfp(n: int) -> Task:
    rng = random.Random(f"ldqa-cfp-{n}")
    fund = pick(
        rng,
        [
            "Open Infrastructure Fund",
            "Regional Innovation Programme",
            "Digital Heritage Grants",
            "Clean Transport Call",
        ],
    )
    deadline = f"{rng.randint(1, 28)} {pick(rng, MONTHS)} 2025, {rng.choice([12, 14, 17])}:00 CET"
    pages = rng.choice([6, 8, 10, 12, 15])
    max_grant = rng.choice([50_000, 75_000, 120_000, 250_000])
    cofund = rng.choice([10, 20, 25, 30])
    text = (
        f"{fund} — Call for proposals {rng.randint(2024, 2025)}/{rng.randint(1, 4)}\n\n"
        "1. Background\n"
        + _paras(rng, rng.randint(10, 20), GRANT)
        + "\n\n2. Eligibility\nApplicants must be legal entities registered in a participating country. Consortia of up to five partners are welcome.\n\n"
        f"3. Funding\nThe maximum grant per project is €{max_grant:,}. Applicants contribute at least {cofund} % of eligible costs from own funds.\n\n"
        f"4. How to apply\nProposals are submitted through the online portal only. The project description must not exceed {pages} pages (A4, 11 pt); annexes do not count. Late submissions are not accepted.\n\n"
        f"5. Timeline\nPortal opens: four weeks before the deadline. Submission deadline: {deadline}. Evaluation results: about ten weeks later.\n\n6. Evaluation\n"
        + _paras(rng, 3)
    )
    q = pick(
        rng,
        [
            "When is the submission deadline, and how long may the project description be?",
            "What's the deadline and the page limit for this call?",
        ],
    )
    ref = f"Submission deadline: {deadline}, via the online portal; the project description may be at most {pages} pages (annexes not counted)."
    if n % 2 == 0:
        q = "How much funding can one project get, and how much do we have to put in ourselves?"
        ref = f"At most €{max_grant:,} per project; the applicant must fund at least {cofund} % of eligible costs itself."
    return Task(f"ldqa-gen-cfp-{n:02d}", CLASS, q, text, ref, tags=["call-for-proposals"])


def tasks() -> list[Task]:
    out: list[Task] = []
    out += [_manual(n) for n in range(1, 8)]
    out += [_handbook(n) for n in range(1, 8)]
    out += [_api(n) for n in range(1, 8)]
    out += [_lease(n) for n in range(1, 7)]
    out += [_datasheet(n) for n in range(1, 7)]
    out += [_cfp(n) for n in range(1, 8)]
    return out
