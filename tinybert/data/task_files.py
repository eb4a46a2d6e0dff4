"""Hand-written: the registry's labelled data for the fine-tuning chapters: Banking77,
Poem Sentiment, Sentence Polarity, UD English-EWT, Universal NER English-EWT, SQuAD
v1.1."""

from __future__ import annotations

from tinybert.data.entry import GH, DataFile, group

ENTRIES: list[DataFile] = []

ENTRIES += group(
    "banking77",
    "classification/banking77",
    GH
    + "PolyAI-LDN/task-specific-datasets/"
    + "57ec275d8078af65b7731c2a98be812d844a6d6b/banking_data/",
    "CC-BY-4.0",
    "Iñigo Casanueva, Tadas Temčinas, Daniela Gerz, Matthew Henderson, "
    "Ivan Vulić (2020). Efficient Intent Detection with Dual Sentence Encoders.",
    [
        (
            "train",
            "train.csv",
            839_073,
            ("b06e26ac675513959a63135f11b94ea7786ed02da65db93a5650d8838cbc664b"),
        ),
        (
            "test",
            "test.csv",
            239_961,
            ("d12d6e3bc4c3103966ae786dc435913c0c563dfa328f5a3646d0e62cfeeb474d"),
        ),
        (
            "categories",
            "categories.json",
            2_036,
            ("53261da888122daf2d120d925458631d9619e15d82e56052e7a42e535ce32b63"),
        ),
    ],
)
ENTRIES += group(
    "poem_sentiment",
    "classification/poem_sentiment",
    GH
    + "google-research-datasets/poem-sentiment/"
    + "612e9a1f86799126c68f0c5d9c3f1fc28f88068f/data/",
    "CC-BY-4.0",
    "Emily Sheng, David Uthus (2020). Investigating Societal Biases in "
    "a Poetry Composition System (the Poem Sentiment dataset).",
    [
        (
            "train",
            "train.tsv",
            40_567,
            ("09503a850796736a8e63504ae2c8de983f57dceebc2342ea93a7f7ad06af56d0"),
        ),
        (
            "dev",
            "dev.tsv",
            4_747,
            ("0770bd7b80e04c92da82e78f9f93ce35d38b334b4830fca2b9b4d7e174f152e5"),
        ),
        (
            "test",
            "test.tsv",
            4_556,
            ("a406d87b62a6b7c9615468a8b66e69c027fa8f2f03a4f8f6c79df26c260de620"),
        ),
    ],
)
ENTRIES += group(
    "sentence_polarity",
    "classification/sentence_polarity",
    GH + ("nltk/nltk_data/5db857e6f7df11eabb5e5665836db9ec8df07e28/packages/corpora/"),
    "CC-BY-4.0",
    "Bo Pang, Lillian Lee (2005). Seeing stars: Exploiting class "
    "relationships for sentiment categorization with respect to rating scales. "
    "Sentence Polarity Dataset v1.0, as packaged by NLTK.",
    [
        (
            "zip",
            "sentence_polarity.zip",
            490_256,
            ("6e1ed4405b65c7eabf1d199a7f7c437091ac21da0ea7467b410a74062574566b"),
        ),
        (
            "xml",
            "sentence_polarity.xml",
            407,
            ("24920f85640238550649a583c1e3bb71ed53a1b3a004f0ddb6ae49051097364b"),
        ),
    ],
    note="Flagged: only the redistributor (NLTK) states CC BY 4.0; the authors' page "
    "states no licence. The .xml is NLTK's package metadata, which holds "
    "that statement.",
)
ENTRIES += group(
    "ud_ewt",
    "token_classification/ud_english_ewt",
    GH
    + "UniversalDependencies/UD_English-EWT/"
    + "4c89b5833a70aa5ed3a00bad2f23f57992cc7df8/",
    "CC-BY-SA-4.0",
    "Natalia Silveira, Timothy Dozat, Marie-Catherine de Marneffe, "
    "Samuel Bowman, Miriam Connor, John Bauer, Christopher D. Manning (2014). A "
    "Gold Standard Dependency Corpus for English. Universal Dependencies English "
    "EWT, release 2.16.",
    [
        (
            "train",
            "en_ewt-ud-train.conllu",
            14_203_025,
            ("3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b"),
        ),
        (
            "dev",
            "en_ewt-ud-dev.conllu",
            1_805_545,
            ("531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6"),
        ),
        (
            "test",
            "en_ewt-ud-test.conllu",
            1_804_515,
            ("e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd"),
        ),
    ],
    note="The licence covers the annotations; portions of the underlying web text may "
    "be (c) Google, Yahoo!, the University of Pennsylvania or other "
    "original authors.",
)
ENTRIES += group(
    "uner_ewt",
    "token_classification/uner_english_ewt",
    GH + "UniversalNER/UNER_English-EWT/8ed072de2fd24022cc62458997fe96a8fe191ea4/",
    "CC-BY-SA-4.0",
    "Stephen Mayhew, Terra Blevins, Shuheng Liu, Marek Šuppa, Hila "
    "Gonen, Joseph Marvin Imperial, Börje F. Karlsson, Peiqin Lin, Nikola Ljubešić, "
    "LJ Miranda, Barbara Plank, Arij Riabi, Yuval Pinter (2024). Universal NER: A "
    "Gold-Standard Multilingual Named Entity Recognition Benchmark. NAACL 2024. "
    "English-EWT.",
    [
        (
            "dev",
            "en_ewt-ud-dev.iob2",
            620_415,
            ("0cafd881cf31d39897b6d588420fab8fbbe4423d271725c59921ac9dd49c0713"),
        ),
        (
            "test",
            "en_ewt-ud-test.iob2",
            623_751,
            ("821ad826d5f503ac03b4edc3fbc2174f21fbb005ec25863caf2051c434616d6e"),
        ),
    ],
    note="The sentences are UD English-EWT's, so the note on its web text applies. The "
    "training file is not in the offline folder (dev and test only).",
)
ENTRIES += group(
    "squad1.1",
    "qa/squad_v1.1",
    GH + ("rajpurkar/SQuAD-explorer/e0c66cfec263165fb3c15cb76a22175e371b71d7/dataset/"),
    "CC-BY-SA-4.0",
    "Pranav Rajpurkar, Jian Zhang, Konstantin Lopyrev, Percy Liang "
    "(2016). SQuAD: 100,000+ Questions for Machine Comprehension of Text.",
    [
        (
            "dev",
            "dev-v1.1.json",
            4_854_279,
            ("95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9"),
        ),
    ],
)
