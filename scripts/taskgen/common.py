"""Shared pieces of the task generator: the task row, seeded draws, name pools, filler.

Every draw comes from `random.Random(<family>-<n>)` (string seeds are stable across runs
and Python versions), so the same generator code writes the same files byte for byte.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

FIRST = (
    "Amara Ines Tomasz Keiko Rafael Lena Oluwaseun Priya Mateo Hanna Dmitri Aisha Jonas "
    "Sofia Kwame Mei Lucas Fatima Erik Nadia Diego Yuki Samuel Ingrid Ravi Chloe Tariq "
    "Elena Marcus Zainab Henrik Lucia Kenji Grace Omar Beatriz Felix Anya Carlos Noor"
).split()
LAST = (
    "Okafor Varga Kowalski Tanaka Moreau Fischer Adeyemi Raman Silva Lindqvist Petrov "
    "Haddad Brandt Rossi Mensah Chen Almeida Khan Nilsson Benali Ortega Sato Mwangi Berg "
    "Iyer Dubois Aziz Novak Castillo Hughes Yilmaz Larsen Ferreira Ito Walsh Rahman"
).split()
COMPANIES = (
    "Northwind Freight|Bluehollow Labs|Kestrel Analytics|Harborline Foods|Vantage Mills|"
    "Copperleaf Health|Quillstone Press|Alder & Finch|Meridian Robotics|Saltmarsh Energy|"
    "Brightwater Retail|Orchid Systems|Tidewell Insurance|Granite Peak Software|"
    "Lumen Textiles|Redfern Logistics|Silverpine Studios|Ostrava Components|Fernhill Dairy|"
    "Cobalt Ridge Mining"
).split("|")
CITIES = (
    "Lisbon Rotterdam Krakow Osaka Lyon Nairobi Leeds Porto Gdansk Valencia Tallinn Accra "
    "Montreal Denver Adelaide Bergen Turin Ghent Brno Malmo"
).split()
MONTHS = (
    "January February March April May June July August September October November December"
).split()


def person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def people(rng: random.Random, n: int) -> list[str]:
    """n distinct full names with distinct first names (speakers are called by first name)."""
    firsts = rng.sample(FIRST, n)
    return [f"{first} {rng.choice(LAST)}" for first in firsts]


def money(value: float, sign: str = "$") -> str:
    return f"{sign}{value:,.2f}"


def pick(rng: random.Random, options: list[str] | tuple[str, ...]) -> str:
    return options[rng.randrange(len(options))]


@dataclass
class Task:
    """One task as the loader reads it (`tokenlens.tasks.CalibrationTask`)."""

    id: str
    task_class: str
    question: str
    context: str
    reference: str
    system: str | None = None
    history: list[dict[str, str]] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "task_class": self.task_class,
            "question": self.question,
            "context": self.context,
            "reference": self.reference,
        }
        if self.system:
            out["system"] = self.system
        if self.history:
            out["history"] = self.history
        out["tags"] = ["generated", *self.tags]
        return out


def turns(*pairs: str) -> list[dict[str, str]]:
    """Alternating user / assistant turns."""
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(pairs)
    ]


# Filler: the talk, prose and noise real long prompts carry around the facts that matter.
SMALLTALK = [
    "Sorry, I was on mute.",
    "Can everyone see my screen now?",
    "Let me just find the right tab, one second.",
    "I think we covered that last week, but happy to go over it again.",
    "Yeah, that matches what I saw in the dashboard.",
    "Okay, moving on unless anyone has something here.",
    "I'll drop the link in the chat.",
    "Did the recording start? Okay, good.",
    "We're a bit over on this item, let's keep going.",
    "Right, and that's still in progress, nothing new to report.",
    "Can you repeat that? You cut out for a second.",
    "I don't have strong feelings either way.",
    "Let's take that offline, it's a rabbit hole.",
    "Same as before, no change on my side.",
    "Good question, I'd have to check the numbers.",
    "I think the doc has the latest version, let me double-check.",
    "Honestly the tooling has been fine this week.",
    "That was mostly cleanup, nothing customer-facing.",
    "We should probably write that down somewhere.",
    "Agreed, let's not reopen it.",
    "I had a look at the tickets this morning, most are duplicates.",
    "The weather in the office is terrible today, by the way.",
    "My internet is flaky, apologies if I drop.",
    "That's fair. I was just curious.",
    "Let's give it another week and see.",
    "No update from me, still waiting on the vendor.",
    "I'll sync with design after this call.",
    "It's the same flaky test as usual, I re-ran it and it passed.",
    "Is that the staging number or production?",
    "Staging, production looks normal.",
]
DISCUSSION = [
    "we looked at the {topic} numbers again and they are roughly where we expected",
    "the {topic} work is about two thirds done, the rest is testing",
    "there was a question from support about {topic}, I answered it in the thread",
    "I'm not sure the {topic} estimate still holds, but it's not blocking anything",
    "the customer asked about {topic} again, same question as in the last call",
    "we talked about {topic} with the vendor, they promised an update",
    "the draft for {topic} is in the shared folder, comments welcome",
    "nothing has changed on {topic} since Monday",
    "someone should double-check the {topic} dashboard, the graph looks odd",
    "the {topic} retro notes are up, mostly small things",
]


def chatter_line(rng: random.Random, topics: list[str]) -> str:
    if rng.random() < 0.55:
        return pick(rng, SMALLTALK)
    text = pick(rng, DISCUSSION).format(topic=pick(rng, topics)).replace("the the ", "the ")
    return text[0].upper() + text[1:] + "."


def clock(start_s: int, offset_s: int) -> str:
    t = start_s + offset_s
    return f"{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}"


DISCLAIMERS = [
    "This message and any attachments are intended solely for the addressee and may contain confidential information. If you received it in error, please delete it and notify the sender.",
    "Please consider the environment before printing this e-mail.",
    "Our offices are closed on public holidays; replies may be delayed.",
    "Registered office: see our website. Company registration and VAT details are available on request.",
]


def envelope(rng: random.Random, body: str, topics: list[str]) -> str:
    """A body as it arrives in a real prompt: a forwarded mail with chatter around it,
    a signature and the disclaimers nobody reads."""
    sender, other = people(rng, 2)
    before = " ".join(chatter_line(rng, topics) for _ in range(rng.randint(2, 5)))
    after = " ".join(chatter_line(rng, topics) for _ in range(rng.randint(2, 6)))
    return (
        f"From: {sender} <{sender.split()[0].lower()}@{pick(rng, COMPANIES).split()[0].lower()}.example>\n"
        f"To: {other}\nSubject: Fwd: {pick(rng, topics)}\n\nHi {other.split()[0]},\n\n{before}\n\n"
        f"---------- Forwarded message ----------\n{body}\n---------- End of forwarded message ----------\n\n"
        f"{after}\n\nThanks,\n{sender}\n{pick(rng, COMPANIES)}\n\n"
        + "\n".join(rng.sample(DISCLAIMERS, 3))
    )
