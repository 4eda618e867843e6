"""RecAgent's studies (Wang et al., "Studying the information cocoon phenomenon", "Studying the
user conformity phenomenon", "Believability ... behaviors in the recommender system"): the
cocoon entropy metric, Soc-Strategy, conformity (attitude change) and the discrimination test."""
