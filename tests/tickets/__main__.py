from tests.tickets import FIXTURES, write_all

print(f"wrote {write_all()} ticket fixtures under {FIXTURES}")
