"""The site builder behind build.py, which stays at the repository's root as the command: the
glossary, finding one's way (navigation, search_index, results_page), the offline copy (offline) and
the measurements (measure, with the experiments/ they run)."""
