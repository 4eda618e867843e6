"""Zhou et al.'s social-media agent ("Knowledge Boundary and Persona Dynamic Shape A Better
Social Media Agent"): persona with dynamic retrieval, knowledge boundary, six actions,
activity planning, short-term memory with a duplicate-post check, follow reflection.

Subpackages follow the paper's sections: persona/, knowledge/, actions/, planning/, memory/,
reflection/; prompts/ holds the templates, tfidf.py the similarity they share. Each plugin
module is one plugin named after its module, so a study ablates a piece with ``-p no:NAME``. The paper's code was never released; these modules follow the
paper's text and cite the section each rule comes from.
"""
