"""WordNet's noun entries as sentences (playground/tools/wordnet_entries.py), on lines in data.noun's format."""

from __future__ import annotations

import pytest

from playground.tools import wordnet_entries

HEADER = "  1 This software and database is being provided to you, the LICENSEE, by  \n"
PARIS = ("08932568 15 n 04 Paris 0 City_of_Light 0 French_capital 0 capital_of_France 0 002 @i 08691669 n 0000 "
         "#p 08929922 n 0000 | the capital and largest city of France; and international center of culture and "
         "commerce  \n")
PRINCE = ("09500217 18 n 01 Paris 0 002 @i 09484664 n 0000 ;c 07979425 n 0000 | (Greek mythology) the prince of Troy "
          "who abducted Helen from her husband Menelaus and provoked the Trojan War  \n")
STAY = ('01053617 04 n 01 stay 0 001 @ 00030358 n 0000 | continuing or remaining in a place or state; "they had a '
        'nice stay in Paris"; "a lengthy hospital stay"  \n')
BANK = ("09213565 17 n 02 bank 0 cant 1 001 @ 09366317 n 0000 | a slope in the turn of a road or track; the outside is "
        "higher than the inside in order to reduce the effects of centrifugal force  \n")
MANY = "10000000 18 n 0c a 0 b 0 c 0 d 0 e 0 f 0 g 0 h 0 i 0 j 0 k 0 l 0 000 | twelve letters  \n"   # w_cnt is hex


@pytest.mark.parametrize("line, sentence", [
    (PARIS, "Paris, also City of Light, French capital or capital of France, is the capital and largest city of "
            "France; and international center of culture and commerce."),
    (PRINCE, "(Greek mythology) Paris is the prince of Troy who abducted Helen from her husband Menelaus and provoked "
             "the Trojan War."),
    (STAY, "stay is continuing or remaining in a place or state."),            # the usage examples left out
    (BANK, "bank, also cant, is a slope in the turn of a road or track; the outside is higher than the inside in "
           "order to reduce the effects of centrifugal force."),               # a definition's own ';' kept
    (MANY, "a, also b, c, d, e, f, g, h, i, j, k or l, is twelve letters."),
])
def test_an_entry_names_its_word_and_synonyms_before_the_definition(line, sentence):
    assert wordnet_entries.entry(line) == sentence


def test_the_licence_header_and_empty_definitions_are_skipped():
    assert wordnet_entries.entry(HEADER) is None
    assert wordnet_entries.entry('10000001 18 n 01 x 0 000 | "only an example"  \n') is None


def test_the_file_keeps_data_noun_order_one_entry_a_line(tmp_path):
    data_noun = tmp_path / "data.noun"
    data_noun.write_text(HEADER * 3 + STAY + PARIS + PRINCE, encoding="utf-8")
    out = tmp_path / "entries.txt"
    wordnet_entries.main([str(data_noun), str(out)])
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and lines[0].startswith("stay is") and lines[1].startswith("Paris, also City of Light")
