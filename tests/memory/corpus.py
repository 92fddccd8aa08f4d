"""A long chat with planted facts: hundreds of everyday messages, facts said once early on,
and questions about them asked much later (built from a fixed seed)."""

from __future__ import annotations

import random

FACTS: list[tuple[str, str]] = [
    ("By the way, my sister's cat is called Pumpernickel.",
     "What was my sister's cat called again?"),
    ("I parked the blue van on Juniper Street, right behind the bakery.",
     "Where did I leave the van?"),
    ("My dentist appointment got moved to Thursday the fourteenth at 9:30.",
     "When is my dentist appointment?"),
    ("The wifi password at the lake cabin is marmalade42, write it down.",
     "What's the wifi password for the cabin?"),
    ("Grandma always put smoked paprika in her lentil soup, that was her secret.",
     "What was grandma's secret for the lentil soup?"),
    ("My new manager is a woman named Ingrid Halvorsen, she came from Oslo.",
     "What's my new manager's name?"),
    ("I'm allergic to hazelnuts, even a trace makes my throat itch.",
     "Which nuts am I allergic to?"),
    ("Our anniversary dinner is booked at a restaurant called Ferrante's.",
     "Where is our anniversary dinner booked?"),
    ("My bike lock combination is 4-7-1-9, I keep forgetting it.",
     "What's the combination of my bike lock?"),
    ("The plumber who fixed the boiler was called Desmond, very friendly guy.",
     "Who was the plumber that fixed our boiler?"),
    ("I finally named my sourdough starter Bubbles McGee.",
     "What did I name my sourdough starter?"),
    ("My flight to Lisbon leaves from gate B42 on Saturday morning.",
     "Which gate does my Lisbon flight leave from?"),
    ("The spare key is hidden under the ceramic frog by the back door.",
     "Where is the spare key hidden?"),
    ("My son's football coach is Mr. Okonkwo, he's strict but fair.",
     "What's the name of my son's football coach?"),
    ("I'm reading a novel called The Salt Orchard, it's about lighthouse keepers.",
     "What was that novel I was reading about lighthouse keepers?"),
    ("My blood type is AB negative, which is apparently rare.",
     "What's my blood type?"),
    ("The neighbour's tortoise, Sir Reginald, is eighty years old.",
     "How old is the neighbour's tortoise?"),
    ("I planted tulips along the fence and garlic in the raised bed.",
     "What did I plant in the raised bed?"),
    ("My childhood best friend Tamsin moved to Winnipeg last year.",
     "Where did Tamsin move to?"),
    ("I keep my passport in the blue folder in the second drawer of the desk.",
     "Where do I keep my passport?"),
    ("The password hint for my laptop is the name of my first hamster, Biscuit.",
     "What was my first hamster's name?"),
    ("We rented a cottage in Cornwall with a view of St Michael's Mount.",
     "Where was the cottage we rented?"),
    ("My favourite tea is lapsang souchong, I love the smoky taste.",
     "Which tea is my favourite?"),
    ("The car's oil was changed at 84,000 kilometres by the garage on Elm Road.",
     "When was the car's oil last changed?"),
    ("My daughter is learning the cello and her teacher is Madame Roussel.",
     "Who teaches my daughter the cello?"),
    ("I lent my ladder to Victor from number twelve and he never returned it.",
     "Who borrowed my ladder?"),
    ("The dog's vet is Dr. Palmqvist at the Linden Street clinic.",
     "Who is the dog's vet?"),
    ("My gym locker is number 317, the one near the sauna.",
     "What's my gym locker number?"),
    ("I'm saving up for a kayak, a red sea kayak from Norway.",
     "What am I saving up for?"),
    ("My uncle Bartholomew grows chillies in his greenhouse in Devon.",
     "What does uncle Bartholomew grow in his greenhouse?"),
    ("Моя кошка Муська боится пылесоса и прячется под диваном.",
     "Кого боится моя кошка Муська?"),
    ("Пароль от роутера на даче — ромашка2020.",
     "Какой пароль от роутера на даче?"),
    ("Мой брат Никита работает пилотом в авиакомпании.",
     "Кем работает мой брат Никита?"),
    ("Бабушкин рецепт пирога с вишней лежит в зелёной тетради.",
     "Где лежит бабушкин рецепт пирога с вишней?"),
    ("Я записался на курсы гончарного мастерства по средам.",
     "На какие курсы я записался?"),
    ("My wedding ring was engraved with the date 12.06.2011 and the word always.",
     "What is engraved on my wedding ring?"),
    ("The boiler's service contract is with Heatwise, renewal in March.",
     "Who is the boiler's service contract with?"),
    ("I buried a time capsule under the old oak in the schoolyard in 1998.",
     "Where did I bury the time capsule?"),
    ("My favourite board game is Carcassonne, we play it every Sunday.",
     "Which board game do we play every Sunday?"),
    ("My mother's maiden name is Kowalczyk, she's from Kraków.",
     "What's my mother's maiden name?"),
]

_SUBJECTS = [
    "the weather", "work", "the traffic", "dinner", "the weekend", "the news", "my back",
    "the garden", "the kids", "the movie", "the meeting", "the train", "my phone",
    "the neighbours", "the shopping", "the holidays", "the budget", "the report",
    "the coffee machine", "the football match", "the concert", "the laundry", "the rent",
]
_USER = [
    "Ugh, {s} was a mess today, I'm exhausted.",
    "Did you hear anything about {s}? Everyone keeps talking about it.",
    "I spent half the afternoon dealing with {s} and got nothing else done.",
    "Honestly {s} is the least of my worries right now.",
    "Can you believe {s} again? Every single week it's the same story.",
    "I think I'll forget about {s} and just take a long walk.",
    "Remind me later to sort out {s}, I keep putting it off.",
    "Not much new, mostly {s} and a bit of reading before bed.",
    "My cousin called about {s} and we talked for an hour.",
    "I made soup and watched something silly, then {s} again.",
    "The cat next door sat on our fence all morning while I worried about {s}.",
    "We drove to the shop, the van was almost out of petrol, and then {s}.",
]
_ASSISTANT = [
    "That sounds tiring. Do you want to talk through {s}, or would a distraction help?",
    "I hear you. {S} can really wear a person down; be kind to yourself tonight.",
    "It makes sense you'd feel that way about {s}. What would make tomorrow easier?",
    "A walk sounds like a good idea. Fresh air usually puts {s} in perspective.",
    "Thanks for telling me. Let's keep an eye on {s} and see how it develops.",
    "Ha, that's a familiar story. {S} rarely goes the way anyone plans.",
]


def _fill(rng: random.Random, templates: list[str]) -> str:
    s = rng.choice(_SUBJECTS)
    return rng.choice(templates).replace("{s}", s).replace("{S}", s[0].upper() + s[1:])


def long_chat(total: int = 400, seed: int = 7, facts: list[tuple[str, str]] | None = None
              ) -> tuple[list[tuple[str, str]], dict[int, int]]:
    """(role, text) turns alternating user/assistant; facts are said by the user in the first
    half. Returns the turns and, per fact index, the index of its message."""
    facts = FACTS if facts is None else facts
    rng = random.Random(seed)
    slots = sorted(rng.sample(range(0, total // 2, 2), len(facts)))
    where: dict[int, int] = {}
    turns: list[tuple[str, str]] = []
    fact_at = dict(zip(slots, range(len(facts)), strict=True))
    for i in range(total):
        if i % 2 == 0 and i in fact_at:
            where[fact_at[i]] = i
            turns.append(("user", facts[fact_at[i]][0]))
        elif i % 2 == 0:
            turns.append(("user", _fill(rng, _USER)))
        else:
            turns.append(("assistant", _fill(rng, _ASSISTANT)))
    return turns, where
