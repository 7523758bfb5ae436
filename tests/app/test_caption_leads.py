"""The fast tier's representative of tests/app/test_caption_agreement.py (slow): the learned-position preset's Attention page
names every claim it contradicts, leads each caption in at most two sentences, and says no fact both ways."""

from __future__ import annotations

from lengen.presets import preset_ids
from tests.app.test_caption_agreement import check, open_page


def test_the_learned_presets_attention_captions_agree_and_lead_short() -> None:
    check(open_page("attention", {"run": preset_ids()["Learned (APE)"]}))
