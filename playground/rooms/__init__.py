"""The class's rooms in a real database: one store (database.py) over two engines, SQLite by default and PostgreSQL
when `DATABASE_URL` names one, its numbered migrations (migrations.py), and the lecturer's follow-me state
(follow.py). The quiz's rooms and answers are playground/polls.py, on the same store."""
