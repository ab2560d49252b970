"""`python -m memoryscope.door`: the verb table, as the README shows it."""

from memoryscope.door.verbs import verb_table

print(verb_table())
