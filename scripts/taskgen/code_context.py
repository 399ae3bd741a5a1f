"""Code-context tasks: real repositories (10k-30k tokens), and small generated programs.

The long ones assemble source files of MIT/BSD-licensed packages pinned in constraints.txt
(their LICENSE file heads the dump, as the licences ask); the question is about a function
or class in it and the reference is read from the code with `ast`, so it is exact. The short
ones are generated programs whose answer comes from running them (a function's result, a
SQL query's rows on sqlite3) or from the planted mismatch (a settings key).
"""

from __future__ import annotations

import ast
import random
import sqlite3
from collections import defaultdict
from pathlib import Path

from common import Task, pick

from tokenlens.tokens import estimate_tokens

CLASS = "code-context"
# (distribution, import package, licence): permissive licences whose terms a dump with the
# LICENSE file on top meets.
PACKAGES = [
    ("click", "click", "BSD-3-Clause"),
    ("attrs", "attr", "MIT"),
    ("idna", "idna", "BSD-3-Clause"),
    ("urllib3", "urllib3", "MIT"),
    ("httpx", "httpx", "BSD-3-Clause"),
    ("anyio", "anyio", "MIT"),
    ("jinja2", "jinja2", "BSD-3-Clause"),
    ("itsdangerous", "itsdangerous", "BSD-3-Clause"),
]


def _site() -> Path:
    import click

    return Path(click.__file__).resolve().parents[1]


def _dist(name: str) -> tuple[str, Path]:
    """(version, licence file) of an installed distribution."""
    info = sorted(_site().glob(f"{name}-*.dist-info"))[0]
    version = info.name[len(name) + 1 : -len(".dist-info")]
    licences = sorted(p for p in info.rglob("LICENSE*") if p.is_file())
    return version, licences[0]


def _files(package: str) -> list[Path]:
    root = _site() / package
    return sorted(
        p for p in root.rglob("*.py") if "__pycache__" not in p.parts and "tests" not in p.parts
    )


def _repo(n: int, rng: random.Random, budget: int) -> tuple[str, list[tuple[str, str]], str, str]:
    dist, package, licence = PACKAGES[n % len(PACKAGES)]
    version, licence_file = _dist(dist)
    files = _files(package)
    rng.shuffle(files)
    chosen: list[tuple[str, str]] = []
    total = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        size = estimate_tokens(text)
        if size > budget * 0.8 or total + size > budget:
            continue
        chosen.append((f"{package}/{path.relative_to(_site() / package).as_posix()}", text))
        total += size
    chosen.sort()
    head = f"### {licence_file.name}\n{licence_file.read_text(encoding='utf-8')}\n"
    dump = head + "\n".join(f"### {name}\n```python\n{text}\n```" for name, text in chosen)
    return dump, chosen, f"{dist}-{version}", licence


def _defs(
    chosen: list[tuple[str, str]],
) -> list[tuple[str, str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]]:
    """(file, qualified name, node) of every function, method and class."""
    out = []
    for name, text in chosen:
        tree = ast.parse(text)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                out.append((name, node.name, node))
            if isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                        out.append((name, f"{node.name}.{sub.name}", sub))
    return out


def _unique(defs: list[tuple[str, str, ast.AST]]) -> list[tuple[str, str, ast.AST]]:
    counts: dict[str, int] = defaultdict(int)
    for _, qual, _ in defs:
        counts[qual] += 1
    return [d for d in defs if counts[d[1]] == 1]


def _defaults(n: int) -> Task:
    rng = random.Random(f"code-repo-defaults-{n}")
    dump, chosen, source, licence = _repo(n, rng, rng.randint(11_000, 26_000))
    candidates = []
    for file, qual, node in _unique(_defs(chosen)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        args = node.args
        pairs = list(
            zip(args.args[len(args.args) - len(args.defaults) :], args.defaults, strict=True)
        )
        pairs += [
            (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
        ]
        for arg, default in pairs:
            text = ast.unparse(default)
            if text not in ("None", "True", "False") and len(text) < 40:
                candidates.append((file, qual, arg.arg, text))
    file, qual, arg, text = rng.choice(candidates)
    question = pick(
        rng,
        [
            f"What is the default value of the `{arg}` parameter of `{qual}`, and in which file is it defined?",
            f"If I call `{qual}` without passing `{arg}`, what value does it get? Which file is that in?",
        ],
    )
    reference = f"`{arg}` defaults to `{text}` in `{qual}`, defined in `{file}`."
    return Task(
        f"code-gen-repo-defaults-{n:02d}",
        CLASS,
        question,
        dump,
        reference,
        tags=[
            "python",
            "repository",
            "long",
            f"source:{source}",
            f"licence:{licence}",
            "fragile:one-line-clue",
        ],
    )


def _callers(n: int) -> Task:
    rng = random.Random(f"code-repo-callers-{n}")
    for attempt in range(20):
        dump, chosen, source, licence = _repo(
            n + 2 + 100 * attempt, rng, rng.randint(12_000, 28_000)
        )
        defs = _unique(_defs(chosen))
        defined = {q.split(".")[-1] for _, q, node in defs if not isinstance(node, ast.ClassDef)}
        calls: dict[str, set[str]] = defaultdict(set)
        for _, qual, node in defs:
            if isinstance(node, ast.ClassDef):
                continue
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call):
                    f = sub.func
                    name = (
                        f.id
                        if isinstance(f, ast.Name)
                        else f.attr
                        if isinstance(f, ast.Attribute)
                        else None
                    )
                    if (
                        name
                        and name in defined
                        and not name.startswith("__")
                        and name != qual.split(".")[-1]
                    ):
                        calls[name].add(qual)
        good = sorted((k, sorted(v)) for k, v in calls.items() if 2 <= len(v) <= 4 and len(k) > 4)
        if good:
            break
    target, callers = rng.choice(good)
    question = pick(
        rng,
        [
            f"Which functions or methods in this code call `{target}`? List all of them.",
            f"I want to change the signature of `{target}`. Which call sites (functions/methods) in these files would I have to update?",
        ],
    )
    reference = (
        f"`{target}` is called from {len(callers)} places: "
        + ", ".join(f"`{c}`" for c in callers)
        + "."
    )
    return Task(
        f"code-gen-repo-callers-{n:02d}",
        CLASS,
        question,
        dump,
        reference,
        tags=["python", "repository", "long", f"source:{source}", f"licence:{licence}"],
    )


def _classes(n: int) -> Task:
    rng = random.Random(f"code-repo-class-{n}")
    dump, chosen, source, licence = _repo(n + 3, rng, rng.randint(11_000, 24_000))
    options = []
    for file, qual, node in _unique(_defs(chosen)):
        if isinstance(node, ast.ClassDef) and node.bases:
            methods = [
                s.name for s in node.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
            if 2 <= len(methods) <= 10:
                options.append((file, qual, [ast.unparse(b) for b in node.bases], methods))
    file, qual, bases, methods = rng.choice(options)
    question = pick(
        rng,
        [
            f"What does the class `{qual}` inherit from, and which methods does it define itself?",
            f"Give me the base classes of `{qual}` and the list of methods defined in its body.",
        ],
    )
    reference = (
        f"`{qual}` (in `{file}`) inherits from "
        + ", ".join(f"`{b}`" for b in bases)
        + f" and defines {len(methods)} methods: "
        + ", ".join(f"`{m}`" for m in methods)
        + "."
    )
    return Task(
        f"code-gen-repo-class-{n:02d}",
        CLASS,
        question,
        dump,
        reference,
        tags=["python", "repository", "long", f"source:{source}", f"licence:{licence}"],
    )


def _settings(n: int) -> Task:
    rng = random.Random(f"code-settings-{n}")
    svc = pick(rng, ["billing", "ingest", "mailer", "search", "reports", "scheduler"])
    key = pick(rng, ["TIMEOUT", "POOL_SIZE", "MAX_RETRIES", "BATCH_SIZE", "CACHE_TTL"])
    env_key = f"{svc.upper()}_{key}"
    code_key = (
        f"{svc.upper()}_{key}_{pick(rng, ['MS', 'SECONDS', 'COUNT', 'LIMIT'])}"
        if n % 2
        else f"{svc.upper()}{key}"
    )
    default = rng.choice([5, 10, 30, 100, 500])
    others = [
        f"{svc.upper()}_{k}" for k in ("LOG_LEVEL", "REGION", "QUEUE_URL", "DB_URL", "SENTRY_DSN")
    ]
    settings = "\n".join(
        [
            f"import os",
            "",
            "",
            "class Settings:",
            f'    """Runtime settings of the {svc} service (read once at start-up)."""',
            "",
        ]
        + [f'    {o.lower().split("_", 1)[1]} = os.environ.get("{o}", "")' for o in others[:3]]
        + [f'    {key.lower()} = int(os.environ.get("{code_key}", "{default}"))']
        + [f'    {o.lower().split("_", 1)[1]} = os.environ.get("{o}", "")' for o in others[3:]]
    )
    env = "\n".join(
        [
            f"{others[0]}=info",
            f"{others[1]}=eu-west-1",
            f"{env_key}={default * rng.randint(3, 9)}",
            f"{others[2]}=https://queue.internal/{svc}",
        ]
    )
    use = f"def run_batch(settings: Settings, items: list[str]) -> None:\n    for chunk in chunks(items, settings.{key.lower()}):\n        process(chunk)\n"
    context = f"# {svc}/settings.py\n```python\n{settings}\n```\n\n# deploy/{svc}.env\n```\n{env}\n```\n\n# {svc}/worker.py\n```python\n{use}```"
    question = f"I raised {env_key} in deploy/{svc}.env and redeployed, but the {svc} service still behaves as if it were {default}. Why?"
    reference = f"settings.py reads the variable `{code_key}`, not `{env_key}`, so the value in the .env file is never read and `{key.lower()}` falls back to its default of {default}. Rename the variable in the .env file to `{code_key}` (or change settings.py to read `{env_key}`)."
    return Task(
        f"code-gen-settings-{n:02d}",
        CLASS,
        question,
        context,
        reference,
        tags=["python", "config", "bug", "short", "fragile:one-line-clue"],
    )


FUNCS = [
    (
        "def shipping_cost(weight_kg: float, express: bool, country: str) -> float:\n"
        "    base = 4.5 if country == 'DE' else 9.0\n"
        "    if weight_kg > {w}:\n"
        "        base += (weight_kg - {w}) * {r}\n"
        "    if express:\n"
        "        base *= {m}\n"
        "    return round(base, 2)\n",
        "shipping_cost({a}, {e}, '{c}')",
        lambda rng: {
            "w": rng.choice([2, 5, 10]),
            "r": rng.choice([0.8, 1.25, 1.5]),
            "m": rng.choice([1.5, 2]),
            "a": rng.choice([3.5, 7, 12.5, 20]),
            "e": rng.choice([True, False]),
            "c": rng.choice(["DE", "FR", "PL"]),
        },
    ),
    (
        "def bucket(values: list[int]) -> dict[str, int]:\n"
        "    out = {{'low': 0, 'mid': 0, 'high': 0}}\n"
        "    for v in values:\n"
        "        if v < {lo}:\n"
        "            out['low'] += 1\n"
        "        elif v <= {hi}:\n"
        "            out['mid'] += 1\n"
        "        else:\n"
        "            out['high'] += v % {k}\n"
        "    return out\n",
        "bucket({vals})",
        lambda rng: {
            "lo": rng.choice([10, 20, 30]),
            "hi": rng.choice([50, 60, 75]),
            "k": rng.choice([3, 4, 7]),
            "vals": [rng.randint(0, 120) for _ in range(8)],
        },
    ),
    (
        "def slugify(title: str, max_len: int = {n}) -> str:\n"
        "    words = [w.lower() for w in title.split() if w.isalnum()]\n"
        "    slug = '{sep}'.join(words)\n"
        "    return slug[:max_len].rstrip('{sep}')\n",
        "slugify('{t}')",
        lambda rng: {
            "n": rng.choice([12, 16, 20]),
            "sep": rng.choice(["-", "_"]),
            "t": rng.choice(
                [
                    "Quarterly Report 2024 final",
                    "How we cut costs by 40 %",
                    "Release notes for v2 and v3",
                    "New pricing: what changes",
                ]
            ),
        },
    ),
    (
        "def next_retry(attempt: int, base: float = {b}, cap: float = {c}) -> float:\n"
        "    delay = base * (2 ** attempt)\n"
        "    if attempt >= {j}:\n"
        "        delay = delay / 2 + {add}\n"
        "    return min(delay, cap)\n",
        "[next_retry(i) for i in range({k})]",
        lambda rng: {
            "b": rng.choice([0.5, 1.0, 1.5]),
            "c": rng.choice([10.0, 20.0, 30.0]),
            "j": rng.choice([2, 3]),
            "add": rng.choice([1, 2, 3]),
            "k": rng.choice([4, 5, 6]),
        },
    ),
]


def _function(n: int) -> Task:
    rng = random.Random(f"code-function-{n}")
    template, call, draw = FUNCS[n % len(FUNCS)]
    values = draw(rng)
    source = template.format(**values)
    expression = call.format(**values)
    scope: dict[str, object] = {}
    exec(source, scope)  # our own generated code, run to get the exact answer
    result = eval(expression, scope)
    noise = "\n\n".join(
        pick(
            rng,
            [
                "def _log(msg):\n    print(f'[app] {msg}')",
                "CONFIG_VERSION = 3",
                "def unused_helper(x):\n    return x * 2  # kept for the old API",
                "# TODO: move to utils.py",
            ],
        )
        for _ in range(3)
    )
    context = f"```python\n{noise}\n\n\n{source}```"
    question = f"What does `{expression}` return with this code? Give the exact value."
    return Task(
        f"code-gen-function-{n:02d}",
        CLASS,
        question,
        context,
        f"`{expression}` returns `{result!r}`.",
        tags=["python", "short"],
    )


def _sql(n: int) -> Task:
    rng = random.Random(f"code-sql-{n}")
    regions = ["north", "south", "east", "west"]
    rows = [
        (
            i,
            person_short(rng),
            pick(rng, regions[:2]),
            rng.randint(1, 40) * 25,
            rng.choice(["paid", "paid", "refunded", "open"]),
        )
        for i in range(1, rng.randint(16, 24))
    ]
    region = rows[0][2]
    totals: dict[str, int] = defaultdict(int)
    for _, who, where, amount, status in rows:
        if status == "paid" and where == region:
            totals[who] += amount
    ranked = sorted(set(totals.values()))
    threshold = ranked[max(0, len(ranked) - rng.randint(2, 3))] if ranked else 100
    query = (
        "SELECT customer, SUM(amount) AS total\nFROM orders\n"
        f"WHERE status = 'paid' AND region = '{region}'\nGROUP BY customer\nHAVING SUM(amount) >= {threshold}\nORDER BY total DESC, customer;"
    )
    db = sqlite3.connect(":memory:")
    db.execute(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, region TEXT, amount INTEGER, status TEXT)"
    )
    db.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?)", rows)
    result = db.execute(query).fetchall()
    table = "\n".join(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} |" for r in rows)
    context = (
        "Schema:\n```sql\nCREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, region TEXT, amount INTEGER, status TEXT);\n```\n\n"
        f"Current rows (`SELECT * FROM orders`):\n| id | customer | region | amount | status |\n|---|---|---|---|---|\n{table}\n\nQuery:\n```sql\n{query}\n```"
    )
    answer = "no rows" if not result else "; ".join(f"{c} {t}" for c, t in result)
    return Task(
        f"code-gen-sql-{n:02d}",
        CLASS,
        "What exactly does this query return on these rows (customer and total, in order)?",
        context,
        f"It returns {len(result)} row(s): {answer}.",
        tags=["sql", "table", "short", "fragile:near-duplicate-lines"],
    )


def person_short(rng: random.Random) -> str:
    return pick(
        rng,
        [
            "acme",
            "globex",
            "initech",
            "umbrella",
            "hooli",
            "vandelay",
            "stark",
            "wayne",
            "tyrell",
            "wonka",
        ],
    )


def tasks() -> list[Task]:
    out: list[Task] = []
    out += [_defaults(n) for n in range(1, 8)]
    out += [_callers(n) for n in range(1, 8)]
    out += [_classes(n) for n in range(1, 8)]
    out += [_settings(n) for n in range(1, 7)]
    out += [_function(n) for n in range(1, 8)]
    out += [_sql(n) for n in range(1, 7)]
    return out
