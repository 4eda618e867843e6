"""Zhou et al.'s activity plan (planner) and its parsing."""
