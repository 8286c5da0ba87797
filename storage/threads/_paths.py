"""Root-to-head path walks over path chains (migration 0005).

A chain is a straight run of messages in which each one is the first child ever published
under the previous one, so its members have consecutive depths. A path is therefore the
chain of its head cut at the head's depth, the chain of that chain's first message's parent
cut at the parent's depth, and so on up to the root: one index range scan per branch point
on the path instead of one primary-key probe per message.
"""

from __future__ import annotations


def chains_cte(head: str) -> str:
    """A recursive CTE `chains(chain_id, upto)` for the path ending at `head`.

    Args:
        head: A SQL expression for the head message id (the Thread id is `$1`).

    Each step probes the primary key twice (the chain's first message, then its parent)
    with `LIMIT 1`, so a planner without statistics never rescans the Thread per step.
    """
    return f"""
chains(chain_id, upto) AS (
    SELECT h.chain_id, h.depth FROM crux_thread_messages h
    WHERE h.thread_id = $1 AND h.message_id = {head}
    UNION ALL
    SELECT p.chain_id, p.depth
    FROM chains c
    CROSS JOIN LATERAL (
        SELECT s.parent_id FROM crux_thread_messages s
        WHERE s.thread_id = $1 AND s.message_id = c.chain_id
        LIMIT 1
    ) s
    CROSS JOIN LATERAL (
        SELECT x.chain_id, x.depth FROM crux_thread_messages x
        WHERE x.thread_id = $1 AND x.message_id = s.parent_id
        LIMIT 1
    ) p
)"""


def path_rows(columns: str) -> str:
    """A FROM clause yielding the path's messages as `m` (needs `chains_cte` before it).

    Args:
        columns: The select list over `m` (the stored message row).

    `OFFSET 0` keeps the LATERAL subquery from being pulled up into a join, so each chain
    is one parameterised range scan of the chain index rather than a hash over the Thread.
    """
    return f"""
SELECT {columns}
FROM chains c CROSS JOIN LATERAL (
    SELECT * FROM crux_thread_messages x
    WHERE x.thread_id = $1 AND x.chain_id = c.chain_id AND x.depth <= c.upto
    OFFSET 0
) m"""
