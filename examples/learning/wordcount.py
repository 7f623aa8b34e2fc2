"""The Python side of the learning example: counts the words of a file."""

import collections
import re


def count(path):
    with open(path, encoding="utf-8") as f:
        words = re.findall(r"[a-z']+", f.read().lower())
    return dict(collections.Counter(words).most_common(3))
