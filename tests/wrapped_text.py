"""Refusals and plan text wrap to the terminal (80 columns when there is none, as under pytest):
tests compare their words, not where the lines break."""


def unwrapped(text: str) -> str:
    return " ".join(text.split())
