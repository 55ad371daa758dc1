"""Data for ``benchmarks/relevance.py``: everyday prompts (about nothing in anyone's memory), a
coding agent's store of 20 memories, questions that share words with its memories, and
paraphrases that share none.

Written by hand for issue 32, not drawn from any benchmark's vocabulary. Every list comes in two
halves, ``tune`` and ``check``: rules are chosen looking at the first and judged on the second.
The prompts mix kinds (coding how-tos, writing tasks, trivia, math, cooking, health, travel,
shopping, small talk) and wordings (questions, imperatives, a pasted line, lower case, long and
short); several deliberately share a word with a typical store ("Recommend a book about
productivity", "What does the -p flag do in mkdir?", "Write a short story about a dog").
"""

from __future__ import annotations

__all__ = ["CODING_STORE", "EVERYDAY", "PARAPHRASES", "PARAPHRASES_CHECK", "RELATED"]

# ~60 prompts a person asks an assistant that are not about their own world at all
EVERYDAY: dict[str, list[str]] = {
    "tune": [
        "How do I reverse a list in Python?",
        "What does the -p flag do in mkdir?",
        "Recommend a book about productivity",
        "Write a haiku about autumn leaves",
        "What is the capital of Australia?",
        "What's 17 times 23?",
        "Explain big-O notation like I'm five",
        "how to center a div in css",
        "Draft a polite email declining a meeting invitation",
        "Who painted the Mona Lisa?",
        "Give me a recipe for banana bread",
        "What are the symptoms of dehydration?",
        "Translate 'where is the train station' into Spanish",
        "Solve for x: 3x + 7 = 22",
        "What is the difference between TCP and UDP?",
        "Summarize the plot of Hamlet in three sentences",
        "Write a regex that matches an email address",
        "How many ounces are in a cup?",
        "Suggest a name for a coffee shop",
        "Why is the sky blue?",
        "Write a short story about a dog who learns to fly",
        "What's a good stretching routine for lower back pain?",
        "Convert 72 degrees Fahrenheit to Celsius",
        "How does compound interest work?",
        "Give me ten ideas for a team-building activity",
        "What is a closure in JavaScript?",
        "Write a limerick about a cat on a train",
        "When did the Berlin Wall fall?",
        "What should I pack for a week in Iceland?",
        "Explain the rules of chess castling",
    ],
    "check": [
        "How can I sort a dictionary by value in Python?",
        "What does git rebase -i do?",
        "Can you recommend a podcast about history?",
        "Write a sonnet about the ocean",
        "What's the tallest mountain in Africa?",
        "What is 15% of 240?",
        "Explain how a hash table works",
        "how do i undo the last commit in git",
        "Write a cover letter for a junior accountant position",
        "Who wrote Pride and Prejudice?",
        "How long should I boil an egg for a runny yolk?",
        "Is it safe to take ibuprofen with coffee?",
        "How do you say 'thank you very much' in Japanese?",
        "What is the derivative of x^3 sin(x)?",
        "What's the difference between a process and a thread?",
        "Give me a one-paragraph summary of the French Revolution",
        "Write a bash one-liner to count lines in all .txt files",
        "How many teaspoons are in a tablespoon?",
        "Brainstorm taglines for a bicycle repair shop",
        "Why do cats purr?",
        "Write a bedtime story about a brave little turtle",
        "What are some good exercises to strengthen knees?",
        "Convert 5 miles to kilometers",
        "What is inflation and why does it happen?",
        "List some fun things to do on a rainy weekend",
        "What is the difference between let and const in JavaScript?",
        "Compose a birthday poem for my grandmother",
        "What year did the first moon landing happen?",
        "What's the best way to learn to juggle?",
        "Explain the offside rule in soccer",
    ],
}

# A coding agent's store: what a developer told their assistant over a few weeks
CODING_STORE: list[str] = [
    "User prefers pnpm over npm",
    "Production deploys go out on Tuesdays after the 10am standup",
    "Feature flags are read from LaunchDarkly; the SDK key lives in Vault",
    "Tests run with pytest -n auto; the integration tests need Docker running",
    "The API service is written in FastAPI with SQLAlchemy 2.0",
    "Use ruff for linting and formatting, line length 100",
    "Postgres 16 runs in docker-compose on port 5433",
    "The main branch is protected: pull requests need two approvals",
    "Staging lives at staging.acme.dev and resets every night",
    "The user's name is Priya and she works on the billing team",
    "Commit messages follow Conventional Commits",
    "The web frontend is Next.js 14 with Tailwind",
    "Errors are reported to Sentry; alerts page #oncall-billing",
    "Do not use print for logging in the backend; use structlog",
    "Database migrations are managed with Alembic; never edit a migration that was applied",
    "User wants concise answers with the code first and the explanation after",
    "CI runs on GitHub Actions and the slow end-to-end suite runs nightly",
    "The billing service talks to Stripe through webhooks, deduplicated by event id",
    "Priya is based in Berlin and works on Central European Time",
    "Type hints are required on public functions and mypy runs in strict mode",
]

# Questions about the store in words it holds (at least one content word in common), several
# wordings per memory: (question, index of the memory in CODING_STORE)
RELATED: dict[str, list[tuple[str, int]]] = {
    "tune": [
        ("Should I use npm or pnpm to add this package?", 0),
        ("When do production deploys happen?", 1),
        ("Where are feature flags configured?", 2),
        ("How do I run the tests?", 3),
        ("Which web framework is the API built with?", 4),
        ("What line length does ruff use here?", 5),
        ("What port is Postgres on?", 6),
        ("How many approvals does a pull request need?", 7),
        ("What's the staging URL?", 8),
        ("Which team is Priya on?", 9),
        ("How should I format my commit messages?", 10),
        ("Is the frontend using Tailwind?", 11),
    ],
    "check": [
        ("Where do errors get reported?", 12),
        ("Can I add a print statement for logging in the backend?", 13),
        ("I need to change a column, how do we handle migrations?", 14),
        ("how do you want your answers formatted", 15),
        ("When does the end-to-end suite run?", 16),
        ("How does billing get events from Stripe?", 17),
        ("What timezone is Priya in?", 18),
        ("Does mypy run in strict mode?", 19),
        ("Do the integration tests need Docker?", 3),
        ("Is it ok to deploy to production on a Friday?", 1),
        ("Where does the LaunchDarkly SDK key live?", 2),
        ("Which Next.js version is the frontend on?", 11),
    ],
}

# Questions that share no content word (after stemming) with the memory they are about:
# BM25 cannot find these; semantic retrieval (issue 32 item 2) should
PARAPHRASES: list[tuple[str, int]] = [
    ("Which package manager should I install dependencies with?", 0),
    ("What day of the week do we ship releases?", 1),
    ("How do we toggle experimental functionality on and off?", 2),
    ("How do I check that my change did not break anything?", 3),
    ("Which Python web library powers our backend?", 4),
    ("What code style checker should I configure?", 5),
    ("How is my local relational database set up?", 6),
    ("What are the rules for merging code into the trunk?", 7),
    ("Where can I try out changes before they reach customers?", 8),
    ("Who am I and which group do I belong to?", 9),
    ("How should I describe my changes when saving them to version control?", 10),
    ("What styling approach does the user interface use?", 11),
]

# A second, held-out set of paraphrases (the first is the dev set semantic retrieval was tuned on):
# other memories (12-19), other wordings, written before any figure of them was seen
PARAPHRASES_CHECK: list[tuple[str, int]] = [
    ("Where do crashes and exceptions show up so I can investigate them?", 12),
    ("Who gets woken up when something breaks in production?", 12),
    ("How should the server side emit diagnostic messages?", 13),
    ("How do we evolve the schema of our tables?", 14),
    ("Can I change an old schema change script that already ran?", 14),
    ("How long and in what order should your replies be?", 15),
    ("When is the lengthy browser-driven test pass scheduled?", 16),
    ("Which automation platform builds our pull requests?", 16),
    ("How do we receive payment notifications from our card processor?", 17),
    ("Which city does the developer live in?", 18),
    ("What clock should I use when scheduling a call with her?", 18),
    ("Do I need to annotate the signatures of exported APIs?", 19),
]
