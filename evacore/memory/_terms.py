"""Words for lexical search: the tokenizer shared by indexing, queries and rescoring, the
stop words, and query terms (weighted, optionally matched as prefixes).

Must not: talk to a database; both index backends and the ranking read terms from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

_ENGLISH = (
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and",
    "any", "are", "as", "at", "be", "because", "been", "before", "being", "below",
    "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down",
    "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he",
    "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in",
    "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no",
    "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours",
    "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such",
    "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there",
    "these", "they", "this", "those", "through", "to", "too", "under", "until", "up",
    "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
    "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves", "s",
    "t", "d", "ll", "m", "re", "ve", "don", "didn", "doesn", "isn", "wasn", "aren", "weren",
    "won", "let", "lets", "ok", "okay", "yes", "yeah", "oh", "um", "hey", "hi", "hello",
    "please", "thanks", "thank", "really", "actually", "again", "still", "something",
    "anything", "got", "get", "know", "think", "tell", "said", "say", "like", "well",
    "much", "many", "remember"
)
_RUSSIAN = (
    "и", "в", "во", "не", "что", "он", "на", "я", "с", "со", "как", "а", "то", "все", "она",
    "так", "его", "но", "да", "ты", "к", "у", "же", "вы", "за", "бы", "по", "только", "ее",
    "мне", "было", "вот", "от", "меня", "еще", "нет", "о", "из", "ему", "теперь", "когда",
    "даже", "ну", "вдруг", "ли", "если", "уже", "или", "ни", "быть", "был", "него", "до",
    "вас", "нибудь", "опять", "уж", "вам", "ведь", "там", "потом", "себя", "ничего", "ей",
    "может", "они", "тут", "где", "есть", "надо", "ней", "для", "мы", "тебя", "их", "чем",
    "была", "сам", "чтоб", "без", "будто", "чего", "раз", "тоже", "себе", "под", "будет",
    "ж", "тогда", "кто", "этот", "того", "потому", "этого", "какой", "совсем", "ним",
    "здесь", "этом", "один", "почти", "мой", "тем", "чтобы", "нее", "сейчас", "были",
    "куда", "зачем", "всех", "никогда", "можно", "при", "наконец", "два", "об", "другой",
    "хоть", "после", "над", "больше", "тот", "через", "эти", "нас", "про", "всего", "них",
    "какая", "много", "разве", "три", "эту", "моя", "впрочем", "хорошо", "свою", "этой",
    "перед", "иногда", "лучше", "чуть", "том", "нельзя", "такой", "им", "более", "всегда",
    "конечно", "всю", "между", "помнишь", "напомни", "скажи", "мою", "мои", "моё", "моего",
    "моей", "моим", "моих", "твой", "твоя", "твою", "твои", "твоё", "свой", "своя", "свои",
    "своё", "её", "наш", "наша", "нашу", "наши", "ваш", "ваша", "вашу", "ваши", "это", "эта"
)
STOP_WORDS = frozenset(_ENGLISH + _RUSSIAN)
"""Words that carry no topic (English and Russian); a query never searches for them."""

MAX_QUERY_TERMS = 24


def words(text: str) -> list[str]:
    """Lower-cased word tokens, split like SQLite's unicode61 and PostgreSQL's `simple`."""
    return _WORD.findall(text.casefold())


@dataclass(frozen=True, slots=True)
class Term:
    text: str
    """The searched form: the word, or its stem when `prefix`."""
    weight: float
    """The weight of the query message the term comes from (1 for the newest)."""
    prefix: bool = False
    group: int = 0
    """Which query message (0 = newest) the term stands for."""

    def matches(self, word: str) -> bool:
        return word.startswith(self.text) if self.prefix else word == self.text


def stem(word: str) -> tuple[str, bool]:
    """A crude, language-free stem: words of 5+ letters lose up to 2 trailing letters and
    are matched as prefixes (sisters/sister, кошка/кошку); shorter words match exactly."""
    if len(word) >= 5 and not word.isdigit():
        return word[: max(4, len(word) - 2)], True
    return word, False


def query_terms(texts_newest_first: list[str], *, decay: float = 0.25,
                prefix: bool = True, limit: int = MAX_QUERY_TERMS) -> list[Term]:
    """Terms of a query built from recent messages: the newest text weighs 1, each older
    one `decay` times less; stop words, 1-letter words and repeats are dropped."""
    best: dict[str, Term] = {}
    weight = 1.0
    for group, text in enumerate(texts_newest_first):
        if weight <= 0:
            break
        for word in words(text):
            if word in STOP_WORDS or len(word) < 2:
                continue
            form, is_prefix = stem(word) if prefix else (word, False)
            if form not in best:
                best[form] = Term(form, weight, is_prefix, group)
        weight *= decay
    ranked = sorted(best.values(), key=lambda t: (t.group, -len(t.text)))
    return ranked[:limit]
