from app.query.retrieval import default_vector_weight


def test_vector_weight_defaults_by_embedder_and_yields_to_the_setting():
    assert default_vector_weight(None, "lexical-v1:512") == 0.0
    assert default_vector_weight(None, "local:all-MiniLM-L6-v2:384") == 0.5
    assert default_vector_weight(None, "minilm:all-MiniLM-L6-v2-int8:384") == 1.0
    assert default_vector_weight(None, "openai:text-embedding-3-small:1536") == 1.0
    assert default_vector_weight(0.25, "lexical-v1:512") == 0.25
