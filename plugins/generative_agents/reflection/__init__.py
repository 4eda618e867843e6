"""Park et al. §4.2: reflection (slot ``reflector``)."""
