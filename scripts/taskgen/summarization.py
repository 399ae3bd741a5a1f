"""Summarization tasks: long meetings, incident channels, support threads, and shorter digests.

Each context carries a handful of planted facts (decisions, owners, dates, counts) in a lot
of talk; the reference summary is written from those facts, so it is the one correct
content a summary must carry.

Why one module past 400 lines: most of it is the written material (phrases, clauses,
turns of talk) the documents are assembled from, kept beside the one generator that uses it.
"""

from __future__ import annotations

import random

from common import (
    CITIES,
    COMPANIES,
    MONTHS,
    Task,
    chatter_line,
    clock,
    money,
    people,
    pick,
)

CLASS = "summarization"
PRODUCTS = ["Atlas", "Beacon", "Cinder", "Drift", "Ember", "Fathom", "Gale", "Harbor", "Iris"]
FEATURES = [
    "offline mode",
    "bulk export",
    "the new onboarding flow",
    "SSO for small teams",
    "dark mode",
    "the audit log",
    "usage-based billing",
    "the mobile widget",
]
TOPICS = [
    "pricing page",
    "churn",
    "hiring",
    "the roadmap",
    "latency",
    "the partner API",
    "accessibility",
    "the design system",
    "support backlog",
    "analytics",
]


def _date(rng: random.Random, year: int = 2025) -> str:
    return f"{rng.randint(2, 27)} {pick(rng, MONTHS[2:11])} {year}"


def _meeting(n: int) -> Task:
    rng = random.Random(f"summ-meeting-{n}")
    crew = people(rng, rng.randint(4, 6))
    first = [name.split()[0] for name in crew]
    product = pick(rng, PRODUCTS)
    feature = pick(rng, FEATURES)
    vendor = pick(rng, COMPANIES)
    d_launch, d_launch2, d_runbook, d_vendor = (_date(rng) for _ in range(4))
    cap = rng.choice([12_000, 18_500, 25_000, 40_000])
    owners = rng.sample(range(len(crew)), 3)
    reversal = n % 3 == 0
    decisions = [
        [
            (
                first[0],
                f"So where are we on the {product} launch? I'm proposing we move it to {d_launch}.",
            ),
            (first[1], "That works for engineering if QA gets the full week."),
            (first[0], f"Okay, decided: the {product} launch moves to {d_launch}."),
        ],
        [
            (first[2], f"I don't think {feature} makes it. The edge cases are still open."),
            (first[0], "Then let's cut it from this release and ship it in the next one."),
            (first[1], f"Agreed, {feature} is out of this release."),
        ],
        [
            (first[owners[0]], f"I can write the migration runbook. {d_runbook} is realistic."),
            (first[0], f"Great, {first[owners[0]]} owns the runbook, due {d_runbook}."),
        ],
        [
            (
                first[owners[1]],
                f"On the vendor question: I'll evaluate {vendor} against what we have now.",
            ),
            (
                first[0],
                f"Please report back by {d_vendor}. And the budget for it is capped at {money(cap)}.",
            ),
            (first[owners[1]], f"Capped at {money(cap)}, understood."),
        ],
    ]
    if reversal:
        late = [
            (
                first[0],
                f"One correction before we close: legal needs another review, so the {product} launch is {d_launch2}, not {d_launch}.",
            ),
            (first[1], f"Fine, {d_launch2} then."),
        ]
    lines: list[str] = []
    start = rng.randint(9, 15) * 3600
    t = 4
    speakers = first
    target = rng.randint(520, 1250)
    slots = sorted(rng.sample(range(50, target - 80), len(decisions)))
    late_at = target - rng.randint(20, 60)
    index = 0
    while len(lines) < target:
        if index < len(slots) and len(lines) >= slots[index]:
            for who, text in decisions[index]:
                lines.append(f"[{clock(start, t)}] {who}: {text}")
                t += rng.randint(4, 20)
            index += 1
            continue
        if reversal and len(lines) == late_at:
            for who, text in late:
                lines.append(f"[{clock(start, t)}] {who}: {text}")
                t += rng.randint(4, 20)
            continue
        lines.append(f"[{clock(start, t)}] {pick(rng, speakers)}: {chatter_line(rng, TOPICS)}")
        t += rng.randint(2, 9)
    head = (
        f"Transcript (auto-generated, speaker labels inferred) | {product} weekly sync\n"
        f"Attendees: {', '.join(crew)}\n" + "-" * 70 + "\n"
    )
    final = d_launch2 if reversal else d_launch
    reference = (
        f"The {product} launch moves to {final}"
        + (f" (first set to {d_launch}, then pushed after a legal review)" if reversal else "")
        + f". {feature[0].upper() + feature[1:]} is cut from this release and moves to the next one. "
        f"{crew[owners[0]]} will write the migration runbook by {d_runbook}. "
        f"{crew[owners[1]]} will evaluate {vendor} and report back by {d_vendor}, with the "
        f"budget capped at {money(cap)}."
    )
    question = pick(
        rng,
        [
            "Summarize this meeting for the people who missed it. Include every decision with its owner and date.",
            "Write a short recap of this call: what was decided, who owns what, and by when.",
            "I couldn't attend. Give me the decisions and action items from this sync in a few sentences.",
        ],
    )
    tags = ["transcript", "meeting", "long"] + (["fragile:reversal"] if reversal else [])
    return Task(
        f"summ-gen-meeting-{n:02d}", CLASS, question, head + "\n".join(lines), reference, tags=tags
    )


ALERT = (
    "[{t}] alertbot: FIRING {alert} on {host} (value={v}) runbook=https://runbooks.internal/{slug}"
)
BOTS = [
    "[{t}] deploybot: no deploys in progress for {svc}",
    "[{t}] statusbot: status page unchanged (Investigating)",
    "[{t}] alertbot: RESOLVED {alert} on {host}",
    "[{t}] pagerbot: incident still open, {n} responders acknowledged",
]


def _incident(n: int) -> Task:
    rng = random.Random(f"summ-incident-{n}")
    crew = people(rng, 5)
    first = [c.split()[0] for c in crew]
    svc = pick(rng, ["checkout", "payments-api", "search", "ledger", "auth", "notifications"])
    cause = pick(
        rng,
        [
            (
                "an expired TLS certificate on the internal load balancer",
                "renewed the certificate and reloaded the load balancer",
            ),
            (
                "a config push that set the connection pool size to 5",
                "rolled the config back to pool size 200",
            ),
            (
                "a full disk on the primary database from unrotated WAL files",
                "freed disk by removing archived WAL and failed over to the replica",
            ),
            (
                "a bad index migration that locked the orders table",
                "killed the migration and restored the old index",
            ),
            (
                "a DNS change that pointed the service at a decommissioned cluster",
                "reverted the DNS record",
            ),
        ],
    )
    affected = rng.randint(3, 90) * 100 + rng.randint(1, 99)
    start = rng.randint(0, 20) * 3600 + rng.randint(0, 59) * 60
    detect = rng.randint(4, 19)
    mitigate = detect + rng.randint(15, 80)
    resolve = mitigate + rng.randint(10, 60)
    fu_owner = rng.sample(range(5), 2)
    fu = [
        f"add an alert on {pick(rng, ['certificate expiry', 'pool saturation', 'disk usage over 80%', 'lock wait time', 'DNS record changes'])}",
        "write the postmortem",
    ]
    hosts = [f"{svc}-{i}" for i in range(1, 7)]
    alerts = ["HighErrorRate", "LatencyP99High", "SaturationHigh", "HealthcheckFailing"]
    events: dict[int, list[str]] = {
        detect: [
            f"{first[0]}: I'm seeing 5xx on {svc}, paging the on-call. Declaring an incident.",
            f"{first[1]}: ack, I'm IC. {first[0]} you're on comms.",
        ],
        detect + 6: [
            f"{first[2]}: error rate is at {rng.randint(20, 80)}% on {svc}, it started at {clock(start, 0)[:5]} UTC."
        ],
        mitigate - 5: [f"{first[3]}: found it. The cause is {cause[0]}."],
        mitigate: [f"{first[3]}: we {cause[1]}. Errors dropping."],
        resolve: [
            f"{first[1]}: error rate back to baseline for 10 minutes, marking resolved at {clock(start, resolve * 60)[:5]} UTC.",
            f"{first[0]}: support says {affected:,} customers saw failed requests during the window.",
            f"{first[1]}: follow-ups: {first[fu_owner[0]]} will {fu[0]}, {first[fu_owner[1]]} will {fu[1]} by Friday.",
        ],
    }
    lines = [f"#inc-{svc}-{rng.randint(100, 999)} channel export (UTC)"]
    total = rng.randint(380, 900)
    minute_of = sorted(rng.choices(range(0, resolve + 20), k=total))
    used: set[int] = set()
    for minute in minute_of:
        for key in list(events):
            if key <= minute and key not in used:
                used.add(key)
                for text in events[key]:
                    lines.append(f"[{clock(start, key * 60 + rng.randint(0, 59))}] {text}")
        t = clock(start, minute * 60 + rng.randint(0, 59))
        roll = rng.random()
        if roll < 0.45:
            lines.append(
                ALERT.format(
                    t=t,
                    alert=pick(rng, alerts),
                    host=pick(rng, hosts),
                    v=round(rng.uniform(0.5, 99), 2),
                    slug=svc,
                )
            )
        elif roll < 0.7:
            lines.append(
                pick(rng, BOTS).format(
                    t=t,
                    svc=svc,
                    alert=pick(rng, alerts),
                    host=pick(rng, hosts),
                    n=rng.randint(2, 6),
                )
            )
        else:
            lines.append(
                f"[{t}] {pick(rng, first)}: {chatter_line(rng, ['the dashboards', 'the error budget', 'the rollback', 'the queue depth', 'the status page'])}"
            )
    reference = (
        f"{svc} returned errors from {clock(start, 0)[:5]} UTC; the incident was declared at "
        f"about {clock(start, detect * 60)[:5]}, mitigated at about {clock(start, mitigate * 60)[:5]} and resolved at "
        f"{clock(start, resolve * 60)[:5]} UTC. Root cause: {cause[0]}; the team {cause[1]}. "
        f"{affected:,} customers saw failed requests. Follow-ups: {crew[fu_owner[0]]} will {fu[0]}, "
        f"and {crew[fu_owner[1]]} will {fu[1]} by Friday."
    )
    question = pick(
        rng,
        [
            "Summarize this incident for the weekly ops review: timeline, root cause, fix, customer impact and follow-ups.",
            "Write the executive summary of this incident from the channel log (what broke, why, how it was fixed, impact, follow-ups).",
        ],
    )
    return Task(
        f"summ-gen-incident-{n:02d}",
        CLASS,
        question,
        "\n".join(lines),
        reference,
        tags=["chat-log", "incident", "logs", "long", "fragile:buried-number"],
    )


DISCLAIMER = (
    "CONFIDENTIALITY NOTICE: This e-mail and any attachments are confidential and may be "
    "privileged. If you are not the intended recipient, please notify the sender and delete "
    "it. Any review, retransmission or other use by persons other than the intended "
    "recipient is prohibited. {co} accepts no liability for viruses."
)


def _support(n: int) -> Task:
    rng = random.Random(f"summ-support-{n}")
    cust, agent, agent2 = people(rng, 3)
    co = pick(rng, COMPANIES)
    vendor = "Cloudbox"
    product = pick(
        rng, ["the sync client", "the billing portal", "the mobile app", "the desktop installer"]
    )
    steps = rng.sample(
        [
            "clearing the local cache",
            "reinstalling the application",
            "switching to a wired connection",
            "resetting the API token",
            "disabling the VPN",
            "updating to the latest version",
        ],
        3,
    )
    fix = pick(
        rng,
        [
            "a server-side quota that had been set to zero for the account was corrected",
            "a duplicate SSO configuration on the account was removed",
            "the account's region was migrated to the correct data center",
        ],
    )
    credit = rng.choice([45, 60, 120, 250, 300])
    plan = pick(rng, ["Team", "Business", "Pro"])
    msgs = [
        (
            cust,
            f"Hi, since the last update {product} fails with error 'SYNC-{rng.randint(100, 999)}' for everyone in our office ({co}, {plan} plan). Please help.",
        ),
        (agent, f"Sorry about that. Could you try {steps[0]} and tell me if it changes anything?"),
        (cust, f"Tried {steps[0]}, no change."),
        (agent, f"Thanks. Next, please try {steps[1]}."),
        (
            cust,
            f"{steps[1][0].upper() + steps[1][1:]} didn't help either. This is blocking our month-end.",
        ),
        (agent, f"Understood, escalating to tier 2. In the meantime, {steps[2]} may help."),
        (cust, f"Also tried {steps[2]}. Still broken."),
        (agent2, f"Tier 2 here. We found the cause: {fix}. Please retry now."),
        (cust, "It works again, thank you. But we lost three days. Is there any compensation?"),
        (
            agent2,
            f"We've applied a service credit of {money(credit)} to your next invoice. Closing the ticket; reply to reopen.",
        ),
    ]
    blocks = []
    day = rng.randint(3, 20)
    for i, (who, text) in enumerate(msgs):
        pad = []
        for _ in range(rng.randint(6, 14)):
            pad.append(
                chatter_line(
                    rng, ["the ticket", "the logs", "the account", "our setup", "the release"]
                )
            )
        sig = f"--\n{who}\n{co if who == cust else vendor + ' Support'}\n{DISCLAIMER.format(co=co if who == cust else vendor)}"
        blocks.append(
            f"From: {who}\nDate: {day + i // 3} {pick(rng, MONTHS)} 2025 {rng.randint(8, 18)}:{rng.randint(10, 59)}\n"
            f"Subject: Re: [#{rng.randint(10000, 99999)}] {product} errors\n\n{text}\n\n"
            + " ".join(pad)
            + f"\n\n{sig}"
        )
    # every reply quotes the whole thread below it, as mail clients do
    thread = []
    for i in range(len(blocks)):
        quoted = "\n".join("> " + line for b in reversed(blocks[:i]) for line in b.splitlines())
        thread.append(blocks[i] + ("\n\n" + quoted if quoted else ""))
    context = ("\n\n" + "=" * 60 + "\n\n").join(reversed(thread[-6:]))
    reference = (
        f"{cust} of {co} ({plan} plan) reported that {product} failed for the whole office after an update. "
        f"Support had them try {steps[0]}, {steps[1]} and {steps[2]}, none of which helped, then escalated to tier 2. "
        f"Tier 2 found that {fix}, which fixed it. The customer asked for compensation and received a service credit of "
        f"{money(credit)} on the next invoice; the ticket is closed."
    )
    question = pick(
        rng,
        [
            "Summarize this support thread for the account manager: the problem, what was tried, what fixed it and what we gave the customer.",
            "Give me a short summary of this ticket (issue, troubleshooting steps, resolution, compensation).",
        ],
    )
    return Task(
        f"summ-gen-support-{n:02d}",
        CLASS,
        question,
        context,
        reference,
        tags=["email", "quoted-replies", "signatures", "disclaimers", "long"],
    )


def _standup(n: int) -> Task:
    rng = random.Random(f"summ-standup-{n}")
    crew = people(rng, 4)
    first = [c.split()[0] for c in crew]
    shipped = rng.sample(
        [
            "the CSV importer",
            "rate limiting on login",
            "the invoice PDF fix",
            "search filters",
            "the retry queue",
            "the admin audit page",
            "password reset emails",
            "the Helm chart upgrade",
        ],
        4,
    )
    blocker_who = rng.randrange(4)
    blocker = pick(
        rng,
        [
            "waiting on security review",
            "no access to the staging database",
            "the vendor API sandbox is down",
            "unclear requirements from product",
        ],
    )
    days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
    ship_day = {i: rng.randrange(1, 5) for i in range(4)}
    lines = []
    for d, day in enumerate(days):
        lines.append(f"## Standup {day}")
        for i in range(4):
            parts = [f"**{first[i]}**:"]
            if d < ship_day[i]:
                parts.append(f"working on {shipped[i]}.")
            elif d == ship_day[i]:
                parts.append(f"shipped {shipped[i]} to production.")
            else:
                parts.append(
                    pick(
                        rng,
                        [
                            "code review and small fixes.",
                            "helping with support tickets.",
                            "paired on the flaky tests.",
                        ],
                    )
                )
            if i == blocker_who and d >= 2:
                parts.append(f"Blocked: {blocker}.")
            parts.append(chatter_line(rng, ["the sprint", "the release", "on-call", "the backlog"]))
            lines.append(" ".join(parts))
        lines.append("")
    reference = (
        " ".join(f"{crew[i]} shipped {shipped[i]} on {days[ship_day[i]]}." for i in range(4))
        + f" {crew[blocker_who]} has been blocked since Wednesday: {blocker}."
    )
    return Task(
        f"summ-gen-standup-{n:02d}",
        CLASS,
        pick(
            rng,
            [
                "Summarize the week from these standup notes: what each person shipped (and when) and any open blocker.",
                "Weekly summary please: one line per person with what they shipped, plus blockers.",
            ],
        ),
        "\n".join(lines),
        reference,
        tags=["notes", "standup", "markdown"],
    )


def _reviews(n: int) -> Task:
    rng = random.Random(f"summ-reviews-{n}")
    product = pick(
        rng,
        [
            "Aero 2 headphones",
            "TrailLite tent",
            "Brewmate kettle",
            "Nimbus desk lamp",
            "Pocket router X1",
        ],
    )
    complaints = rng.sample(
        [
            "battery life",
            "the hinge breaking",
            "shipping damage",
            "a loud fan",
            "the app disconnecting",
            "the strap",
        ],
        2,
    )
    counts = {
        5: rng.randint(6, 14),
        4: rng.randint(3, 9),
        3: rng.randint(1, 5),
        2: rng.randint(1, 4),
        1: rng.randint(2, 6),
    }
    c1 = rng.randint(4, min(7, counts[1] + counts[2] + counts[3]))
    c1 = min(c1, counts[1] + counts[2] + counts[3])
    low = [s for s in (1, 2, 3) for _ in range(counts[s])]
    rng.shuffle(low)
    mention = {i: complaints[0] for i in range(c1)}
    for i in range(c1, len(low)):
        mention[i] = complaints[1] if i % 2 == 0 else "nothing specific"
    c2 = sum(1 for i in range(c1, len(low)) if i % 2 == 0)
    reviews = []
    for i, stars in enumerate(low):
        what = mention[i]
        text = (
            f"Disappointed. The problem is {what}."
            if what != "nothing specific"
            else "Just okay, expected more for the price."
        )
        reviews.append((stars, text))
    for s in (4, 5):
        for _ in range(counts[s]):
            reviews.append(
                (
                    s,
                    pick(
                        rng,
                        [
                            "Great value, works as described.",
                            "Love it, would buy again.",
                            "Solid build, fast delivery.",
                            "Does the job well.",
                        ],
                    ),
                )
            )
    rng.shuffle(reviews)
    lines = [f"Customer reviews — {product} (export, {len(reviews)} reviews)"]
    for i, (s, text) in enumerate(reviews, 1):
        lines.append(
            f"#{i} {'★' * s}{'☆' * (5 - s)} ({s}/5) — {pick(rng, ['Verified purchase', 'Verified purchase', 'Gift'])} — {text} Helpful? {rng.randint(0, 30)}"
        )
    total = len(reviews)
    avg = sum(s * c for s, c in counts.items()) / total
    reference = (
        f"{total} reviews, average {avg:.1f} stars: {counts[5]} five-star, {counts[4]} four-star, {counts[3]} three-star, "
        f"{counts[2]} two-star and {counts[1]} one-star. The most common complaint is {complaints[0]} ({c1} reviews), "
        f"then {complaints[1]} ({c2} reviews); the positive reviews praise value and build."
    )
    return Task(
        f"summ-gen-reviews-{n:02d}",
        CLASS,
        "Summarize these reviews for the product team: the rating breakdown and the most common complaints with how many reviews mention each.",
        "\n".join(lines),
        reference,
        tags=["reviews", "fragile:counts"],
    )


def _changelog(n: int) -> Task:
    rng = random.Random(f"summ-changelog-{n}")
    lib = pick(rng, ["orbitdb-client", "quiver", "ledgerline", "fastpath", "hollow-ui"])
    major = rng.randint(2, 7)
    breaking = rng.sample(
        [
            "`connect()` no longer accepts a positional timeout; pass `timeout=`",
            "Python 3.8 is no longer supported",
            "the `legacy_json` option was removed",
            "`Client.fetch` now returns an iterator instead of a list",
            "the default retry count changed from 3 to 0",
            "environment variable `QV_HOME` was renamed to `QUIVER_HOME`",
        ],
        3,
    )
    deprecated = pick(rng, ["`Session.open_raw()`", "the `--fast` flag", "`utils.flatten`"])
    entries = [f"- BREAKING: {b}." for b in breaking] + [
        f"- Deprecated {deprecated}; it will be removed in {major + 1}.0."
    ]
    filler = [
        "- Fixed a typo in the error message for invalid URLs.",
        "- Improved performance of bulk inserts by ~{p}%.",
        "- Docs: new section on connection pooling.",
        "- Fixed a rare race in the connection pool on shutdown (#{i}).",
        "- Added type hints to the `models` module.",
        "- CI now runs on {os}.",
        "- Bumped minimum `urllib3` to 2.0.",
        "- Fixed `repr()` of `Record` objects with unicode keys (#{i}).",
        "- Internal: refactored the query builder.",
        "- Added `Client.ping()`.",
    ]
    body = entries + [
        pick(rng, filler).format(
            p=rng.randint(5, 40),
            i=rng.randint(100, 2000),
            os=pick(rng, ["ARM64", "Windows", "macOS 14"]),
        )
        for _ in range(rng.randint(25, 50))
    ]
    rng.shuffle(body)
    older = []
    for minor in range(rng.randint(3, 6), 0, -1):
        older.append(
            f"\n## {major - 1}.{minor}.0\n"
            + "\n".join(
                pick(rng, filler).format(p=rng.randint(5, 40), i=rng.randint(100, 2000), os="Linux")
                for _ in range(rng.randint(4, 9))
            )
        )
    context = (
        f"# Changelog — {lib}\n\n## {major}.0.0 (unreleased)\n"
        + "\n".join(body)
        + "\n"
        + "\n".join(older)
    )
    reference = (
        f"{lib} {major}.0.0 has three breaking changes: {breaking[0]}; {breaking[1]}; and {breaking[2]}. "
        f"It also deprecates {deprecated}, to be removed in {major + 1}.0. The rest are fixes, docs and small additions."
    )
    return Task(
        f"summ-gen-changelog-{n:02d}",
        CLASS,
        pick(
            rng,
            [
                f"Summarize what users must know before upgrading to {major}.0.0.",
                f"What changes in {major}.0.0 matter for an upgrade? Short summary please.",
            ],
        ),
        context,
        reference,
        tags=["release-notes", "markdown", "fragile:buried-item"],
    )


def tasks() -> list[Task]:
    out: list[Task] = []
    out += [_meeting(n) for n in range(1, 9)]
    out += [_incident(n) for n in range(1, 8)]
    out += [_support(n) for n in range(1, 7)]
    out += [_standup(n) for n in range(1, 7)]
    out += [_reviews(n) for n in range(1, 7)]
    out += [_changelog(n) for n in range(1, 8)]
    return out
