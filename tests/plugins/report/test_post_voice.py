"""The voice of a post (benchmarks/groundedness.py's voice column): first person, a leaked
prompt, a letter or an assistant's reply, on posts the offline model really wrote."""

from __future__ import annotations

from townsquare.plugins.report.post_voice import addresses_someone, is_first_person, leaks_prompt, voice_shares

POSTS = {
    # (first person, leaks, addresses)
    "Picked the first tomatoes this morning, and my balcony smells of basil.": (True, False, False),
    "We finally finished the trail, our legs are done.": (True, False, False),
    "Tobias is a German carpenter with a passion for handmade furniture.": (False, False, False),
    "You're the person described in the \"Persona information\" above. You read social media every day.": (False, True, False),
    "Persona information: Alba López, 28. Chat History: @Alba": (False, True, False),
    "Dear Sarah,": (False, False, True),
    "I'm so glad you reached out! A bit about yourself.": (True, False, True),
    "Hi Alba, it's great to meet you at the game.": (False, False, True),
    "You're a helpful AI named SmolLM, trained to provide information.": (False, True, False),
    "Visiting the US this spring to see the Grand Canyon.": (False, False, False),
}
#: posts that open as the prompt's role line does (a leak), and second-person posts that do not
ROLE_LINES = {
    "Impersona: You are Alba López, 28, a nurse in Madrid.": True,
    "impersona: I love my garden": True,
    "You are Tobias, a carpenter who posts about furniture.": True,
    "You're Sarah and you read social media every day.": True,
    "  \"You are Bo. Write a post.\"": True,
    "You are amazing, thank you all for the birthday wishes!": False,
    "you're never too old to learn to swim, I started at 40": False,
    "Our team said: you are Welcome anytime at the cafe": False,
}


def test_each_voice_test():
    for text, (first, leak, address) in POSTS.items():
        assert (is_first_person(text), leaks_prompt(text), addresses_someone(text)) == (first, leak, address), text


def test_a_post_opening_as_the_role_line_leaks():
    assert {text: leaks_prompt(text) for text in ROLE_LINES} == ROLE_LINES


def test_shares():
    shares = voice_shares(list(POSTS) + ["", "   "])  # empty posts are not counted
    assert shares["posts"] == 10
    assert (shares["first_person"], shares["leaks"], shares["addresses"]) == (0.3, 0.3, 0.3)
    assert voice_shares([]) == {"posts": 0, "first_person": 0.0, "leaks": 0.0, "addresses": 0.0}
