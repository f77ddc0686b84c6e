from app.query.retrieval import default_rrf_k, default_sentence_weight, default_vector_weight


def test_vector_weight_defaults_by_embedder_and_yields_to_the_setting():
    assert default_vector_weight(None, "lexical-v1:512") == 0.0
    assert default_vector_weight(None, "local:all-MiniLM-L6-v2:384") == 0.5
    assert default_vector_weight(None, "minilm:all-MiniLM-L6-v2-int8:384") == 1.5
    assert default_vector_weight(None, "openai:text-embedding-3-small:1536") == 1.0
    assert default_vector_weight(0.25, "lexical-v1:512") == 0.25


def test_rrf_constant_defaults_by_embedder_and_yields_to_the_setting():
    assert default_rrf_k(None, "minilm:all-MiniLM-L6-v2-int8:384") == 4
    assert default_rrf_k(None, "lexical-v1:512") == 60
    assert default_rrf_k(None, "openai:text-embedding-3-small:1536") == 60
    assert default_rrf_k(30, "minilm:all-MiniLM-L6-v2-int8:384") == 30


def test_sentence_weight_defaults_by_embedder_and_yields_to_the_setting():
    assert default_sentence_weight(None, "minilm:all-MiniLM-L6-v2-int8:384") == 0.5
    assert default_sentence_weight(None, "lexical-v1:512") == 0.0
    assert default_sentence_weight(None, "openai:text-embedding-3-small:1536") == 0.0
    assert default_sentence_weight(0.3, "lexical-v1:512") == 0.3
