from tests.incidents import FIXTURES, write_all

print(f"wrote {write_all()} incident logs under {FIXTURES}")
