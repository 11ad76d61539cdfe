"""A deterministic store of everyday memories, and queries it cannot answer (issue 44).

`everyday_memories()` is 300 short first-person facts (people, places, food, work, health,
money, hobbies, travel), as a personal assistant would save them; `GIBBERISH` and
`UNANSWERABLE` are queries that none of them is relevant to; `ANSWERABLE` pairs a question
with a phrase of the memory that answers it.
"""

from __future__ import annotations

import itertools

PEOPLE = ("Anna", "Marco", "Priya", "Tom", "Lena", "Jonas", "Sofia", "Ken", "Ines", "Omar")
PLACES = ("Lisbon", "Zürich", "Osaka", "Toronto", "Berlin", "Nairobi", "Oslo", "Lima", "Porto")
FACTS = (
    "{p} likes green tea in the morning and coffee after lunch",
    "{p}'s birthday dinner is booked at the Thai place near the station",
    "{p} is allergic to peanuts, so check the menu before ordering",
    "{p} moved to {c} last spring and rents a flat near the river",
    "{p} plays tennis on Tuesday evenings at the club",
    "{p} recommended the novel about the lighthouse keeper",
    "{p} prefers window seats on long flights",
    "Dentist appointment with {p} next Thursday at 9",
    "{p} is learning to bake sourdough bread",
    "{p}'s cat is called Pepper and needs a vet check in May",
    "Lent {p} the camping stove; get it back before the trip to {c}",
    "{p} works as a nurse on night shifts this month",
    "Book the train to {c} for the wedding of {p}",
    "{p} runs the Saturday farmers market stall with honey",
    "{p}'s rent for the flat in {c} goes up by 50 euros in January",
    "{p} said the hiking trail above {c} is closed after the storm",
    "Pay {p} back 30 euros for the concert tickets",
    "{p} is vegetarian and dislikes mushrooms",
    "{p} started a pottery class on Wednesday nights",
    "{p}'s flight to {c} leaves at 7:40 from terminal 2",
    "{p} asked for the lasagne recipe with spinach",
    "Garden: water the tomatoes every other day while {p} is away",
    "{p} switched the electricity contract to a cheaper provider",
    "{p}'s daughter starts school in {c} in September",
    "{p}'s car needs new winter tyres before the drive to {c}",
    "{p} is training for a half marathon in {c}",
    "Renew the passport; {p} says the office in {c} is quicker",
    "{p} sings in a choir that rehearses on Sundays",
    "{p}'s gym membership renews automatically in March",
    "{p} loves jazz and goes to the club in {c} on Fridays",
)

GIBBERISH = (
    "qwertyuiopasdf",
    "lorem ipsum dolor sit amet",
    "zxcv bnm asdfgh",
    "xkcd flurbo gorp snizzle",
    "aaaaaaaaaaaaaaaa",
)

UNANSWERABLE = (
    "What torque settings does the forklift's hydraulic mast need?",
    "Which Kubernetes pod eviction policy did we choose for the cluster?",
    "How many megawatts does the offshore wind farm produce?",
    "What is the melting point of tungsten carbide?",
    "Which compiler flags speed up the Fortran solver?",
    "What did the quarterly earnings call say about semiconductor margins?",
    "How do I calibrate the oscilloscope probe?",
    "Which chess opening did the grandmaster play in round five?",
)

ANSWERABLE = (
    ("Who is allergic to peanuts?", "allergic to peanuts"),
    ("What is the cat called?", "cat is called Pepper"),
    ("When does the flight leave?", "flight to"),
    ("Who plays tennis?", "plays tennis"),
    ("What sourdough bread", "sourdough"),
    ("Zürich", "Zürich"),
)


def everyday_memories(n: int = 300) -> list[tuple[str, str]]:
    """`n` distinct (content, category) pairs, the same on every call."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for k, (fact, person) in enumerate(itertools.product(FACTS, PEOPLE)):
        text = fact.format(p=person, c=PLACES[k % len(PLACES)])
        if text not in seen:
            seen.add(text)
            out.append((text, ("people", "places", "plans")[k % 3]))
        if len(out) == n:
            break
    return out


# everyday prompts to a coding agent that nothing a project stores answers (issue 54: each
# got 3-8 memories injected); none is a reference sentence of stores/index/relevance.py
CODING_PROMPTS = (
    "what is 2+2",
    "refactor this function to use a dataclass",
    "why does this test fail with KeyError",
    "write a regex that matches an email address",
    "how do I undo the last git commit",
    "add type hints to this module",
    "rename the variable foo to bar everywhere",
    "explain this stack trace from the parser",
)

# a new user's first memories of a project (newcomer-turn5.md)
PROJECT_MEMORIES = (
    "We deploy the web app with make ship",
    "The frontend is written in TypeScript with React 19 and Vite",
    "Staging runs Postgres 15 on the db-stage host",
    "The user is in the Europe/Berlin time zone",
    "Never git push --force to main",
)
