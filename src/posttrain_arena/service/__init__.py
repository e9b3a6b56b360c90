"""The Arena service: database, auth, challenges, collections, runs, budget, results,
leaderboard, board, the HTTP API (`app.create_app`) and the worker."""
