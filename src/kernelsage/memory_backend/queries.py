"""Every SQL statement of the memory, as named constants; the Python logic lives in the concern modules.

The schema itself, the numbered migrations, is SQL text too, in migrations.py. Values always travel
as parameters. Only identifiers that vary (a namespace's vector index, the dimension and id it is
defined on, its lists, the tables of an export) are composed, with `psycopg.sql`, in the functions at the end.
"""

from __future__ import annotations

from psycopg import sql

LOCK_CLASS = 0x4B53  # advisory-lock key space of kernelsage ("KS"); the second key is the namespace id
INDEX_LOCK_CLASS = 0x4B54  # building or dropping vector indexes ("KT")
INDEX_LOCK_ALL = 0  # its second key: one lock for every namespace's builds (vector_index._build_lock says why)

# -- namespaces -------------------------------------------------------------------------------------

_NAMESPACE_COLUMNS = "id, name, embedding_dim, embedding_model, episode_seq, hot_version, created_at"
NAMESPACES = f"SELECT {_NAMESPACE_COLUMNS} FROM ks_namespaces ORDER BY name"
NAMESPACE_BY_NAME = f"SELECT {_NAMESPACE_COLUMNS} FROM ks_namespaces WHERE name = %s"
# RETURNING only for the transaction that created it: a concurrent creator waits, then gets no row.
INSERT_NAMESPACE = (
    "INSERT INTO ks_namespaces (name, embedding_dim, embedding_model) VALUES (%s, %s, %s) "
    "ON CONFLICT (name) DO NOTHING RETURNING id"
)
DELETE_NAMESPACE = "DELETE FROM ks_namespaces WHERE name = %s RETURNING id"
COUNTERS = "SELECT episode_seq, hot_version FROM ks_namespaces WHERE id = %s"
NAMESPACE_EXISTS = "SELECT EXISTS (SELECT FROM ks_namespaces WHERE id = %s) AS found"
# The one lock order of every transaction that writes items: first the namespace row (this), then items in id
# order. NO KEY UPDATE: it serialises the writers of a namespace without blocking the foreign-key checks of
# retrieval ledgers and exposures, which take KEY SHARE locks.
COUNTERS_FOR_UPDATE = COUNTERS + " FOR NO KEY UPDATE"
SET_EPISODE_SEQ = "UPDATE ks_namespaces SET episode_seq = %s WHERE id = %s"
SET_HOT_VERSION = "UPDATE ks_namespaces SET hot_version = %s WHERE id = %s"
SET_COUNTERS = "UPDATE ks_namespaces SET episode_seq = %s, hot_version = %s WHERE id = %s"

# -- items ------------------------------------------------------------------------------------------

_ITEM_COLUMNS = (
    "id, kind, text, evidence, code_example, operator, source_episode, rule_text, tokens, rule_tokens, "
    "utility, n_ret, n_ret_cold, n_ado, adopting_ops, access, q_draft, q_refine, state, metadata, "
    "created_at, updated_at, promoted_at, demoted_at"
)
_ITEM_COLUMNS_OF_I = ", ".join("i." + c.strip() for c in _ITEM_COLUMNS.split(","))  # the same, of ks_items i
NEXT_ITEM_IDS = "SELECT nextval('ks_items_id_seq') AS id FROM generate_series(1, %s)"
COPY_ITEMS = (
    "COPY ks_items (id, namespace_id, kind, text, evidence, code_example, operator, source_episode, "
    "tokens, metadata, eligible_since) FROM STDIN"
)
COPY_ITEM_VECTORS = "COPY ks_item_vectors (item_id, namespace_id, embedding) FROM STDIN"
# The same rows as COPY_ITEMS / COPY_ITEM_VECTORS, as one statement each with array parameters (in array
# order), for the few items of an episode commit: COPY cannot run in pipeline mode. The vectors are their
# text form (pgvector's, as COPY sends them), cast by the server.
INSERT_ITEMS = (
    "INSERT INTO ks_items (id, namespace_id, kind, text, evidence, code_example, operator, source_episode, "
    "tokens, metadata, eligible_since) SELECT i.id, %(ns)s, i.kind, i.text, i.evidence, i.code, i.operator, "
    "i.episode, i.tokens, i.metadata, %(seq)s FROM unnest(%(ids)s::bigint[], %(kinds)s::text[], %(texts)s::text[], "
    "%(evidence)s::text[], %(code)s::text[], %(operators)s::text[], %(episodes)s::text[], %(tokens)s::int[], "
    "%(metadata)s::jsonb[]) AS i(id, kind, text, evidence, code, operator, episode, tokens, metadata)"
)
INSERT_ITEM_VECTORS = (
    "INSERT INTO ks_item_vectors (item_id, namespace_id, embedding) "
    "SELECT v.id, %s, v.embedding::vector FROM unnest(%s::bigint[], %s::text[]) AS v(id, embedding)"
)
ITEM = f"SELECT {_ITEM_COLUMNS} FROM ks_items WHERE namespace_id = %s AND id = %s"
ITEMS_IN_NAMESPACE = f"SELECT {_ITEM_COLUMNS} FROM ks_items WHERE namespace_id = %s AND id = ANY(%s) ORDER BY id"
ITEMS_BY_IDS = f"SELECT {_ITEM_COLUMNS} FROM ks_items WHERE id = ANY(%s) ORDER BY id"
COUNT_ITEMS = "SELECT count(*) AS n FROM ks_items WHERE namespace_id = %s AND (%s::text IS NULL OR kind = %s)"
COUNT_VECTORS = "SELECT count(*) AS n FROM ks_items WHERE namespace_id = %s"  # index-only on (namespace_id, state)
LIST_ITEMS = (
    f"SELECT {_ITEM_COLUMNS} FROM ks_items WHERE namespace_id = %s AND (%s::text IS NULL OR state = %s) "
    "ORDER BY utility DESC, id LIMIT %s"
)
HOT_ITEMS = f"SELECT {_ITEM_COLUMNS} FROM ks_items WHERE namespace_id = %s AND state = 'hot' ORDER BY id"

# Statistics as ItemStats fields (see item_rows.fetch_stats), with `seq` for the eligible-episode count.
_STATS = (
    "SELECT id, utility, n_ret, n_ret_cold, n_ado, adopting_ops, access, q_draft, q_refine, state, "
    "COALESCE(rule_tokens, tokens), eligible_banked + COALESCE(%(seq)s - eligible_since, 0), "
    "rule_text IS NOT NULL FROM ks_items WHERE "
)
STATS_OF_SHOWN_FOR_UPDATE = _STATS + "namespace_id = %(ns)s AND id = ANY(%(ids)s) ORDER BY id FOR NO KEY UPDATE"
STATS_OF_IDS = _STATS + "id = ANY(%(ids)s)"
# Consolidation's columns (item_rows.fetch_gate_candidates), one array each, of a superset of the items that
# can pass the validation gate (ugc.passes_gate decides). Arrays rather than rows: the curator reads thousands
# after every episode. adopting_ops holds distinct operators (written from a set, deduplicated on import).
GATE_CANDIDATE_COLUMNS = (
    "SELECT array_agg(id), array_agg(utility), array_agg(n_ado), array_agg(cardinality(adopting_ops)), "
    "array_agg(access), array_agg(n_ret_cold), array_agg(eligible_banked + COALESCE(%(seq)s - eligible_since, 0)), "
    "array_agg(COALESCE(rule_tokens, tokens)), array_agg(state = 'hot'), array_agg(state = 'validated'), "
    "array_agg(rule_text IS NOT NULL) "
    "FROM ks_items WHERE namespace_id = %(ns)s AND (state <> 'cold' OR (utility > 0 AND n_ado >= %(k)s))"
)
# The same items for the incremental read (candidates.py): the eligible-episode count as its parts (banked,
# and the episode since which the item is retrievable), so it can be counted at any later episode. The arrays
# come from one scan, so entry i of each is one row; candidates.py sorts them by id.
_CANDIDATE_COLUMNS = (
    "SELECT array_agg(id), array_agg(utility), array_agg(n_ado), array_agg(cardinality(adopting_ops)), "
    "array_agg(access), array_agg(n_ret_cold), array_agg(eligible_banked), array_agg(COALESCE(eligible_since, 0)), "
    "array_agg(eligible_since IS NOT NULL), array_agg(COALESCE(rule_tokens, tokens)), array_agg(state = 'hot'), "
    "array_agg(state = 'validated'), array_agg(rule_text IS NOT NULL) FROM ks_items "
)
_MAY_PASS_THE_GATE = "(state <> 'cold' OR (utility > 0 AND n_ado >= %(k)s))"
CANDIDATES_OF_NAMESPACE = _CANDIDATE_COLUMNS + "WHERE namespace_id = %(ns)s AND " + _MAY_PASS_THE_GATE
# Rows by id (the namespace's: credited by its episodes, or written by its consolidation): found through the
# primary key alone; the (namespace_id, state) index, which every flip of a state grows until a vacuum, would
# be read whole beside it.
CANDIDATES_OF_IDS = _CANDIDATE_COLUMNS + "WHERE id = ANY(%(ids)b::bigint[]) AND " + _MAY_PASS_THE_GATE
# The items whose statistics changed after episode %s: a commit credits every item whose statistics it writes.
CREDITED_SINCE = (
    "SELECT array_agg(DISTINCT c.item_id) AS ids FROM ks_episodes e JOIN ks_credits c "
    "ON c.namespace_id = e.namespace_id AND c.episode_id = e.episode_id WHERE e.namespace_id = %s AND e.seq > %s"
)
UGC_EPOCH = "SELECT ugc_epoch FROM ks_namespaces WHERE id = %s"
BUMP_UGC_EPOCH = "UPDATE ks_namespaces SET ugc_epoch = ugc_epoch + 1 WHERE id = %s RETURNING ugc_epoch"

# -- retrieval --------------------------------------------------------------------------------------

# The lists an IVFFlat search reads; iterative scans read further lists when the resident-rule filter leaves
# fewer rows than asked for.
SEARCH_SETTINGS = "SELECT set_config('ivfflat.probes', %s, true), set_config('ivfflat.iterative_scan', %s, true)"

# Statistics of the tables retrieval plans by namespace, refreshed after an index rebuild (samples; no lock
# that writers or readers wait for).
ANALYZE_ITEM_TABLES = "ANALYZE ks_items, ks_item_names"

# Lexical retrieval (hybrid.py), on ks_item_names (migration 7). First how rare each of the query's names
# (%(names)s, lower-cased) is: the namespace's items, counted up to %(cap)s, and per name the items holding
# it, counted only up to one past the count that makes a name common (hybrid.name_weights: %(share)s of the
# items counted, at least %(pool)s). Each count reads at most that many entries of the names' primary key, so
# a name every item holds costs no more than a rare one.
LEXICAL_NAME_COUNTS = (
    "WITH total AS MATERIALIZED (SELECT count(*) AS n FROM (SELECT 1 FROM ks_items WHERE namespace_id = %(ns)s "
    "LIMIT %(cap)s) AS s) "
    "SELECT (SELECT n FROM total) AS items, (SELECT count(*) FROM (SELECT 1 FROM ks_item_names m "
    "WHERE m.namespace_id = %(ns)s AND m.name = x.name "
    "LIMIT (SELECT greatest(ceil(t.n * %(share)s)::bigint, %(pool)s) + 1 FROM total t)) AS s) AS df "
    "FROM unnest(%(names)s::text[]) WITH ORDINALITY AS x(name, ord) ORDER BY x.ord"
)
# Then the items holding any of the names kept (common ones are left out, so each name read holds a bounded
# number of items), ranked by the summed weights (%(weights)s, hybrid.name_weights) of the names each holds,
# then by id. The ranking reads the names' key alone; only its first rows (the pool, and as many more as the
# namespace has hot rules, which a policy with hot memory leaves out) are read from ks_items: an API named by
# a thousand lessons costs a thousand index entries, not a thousand item rows.
LEXICAL_ITEMS = (
    f"SELECT {_ITEM_COLUMNS_OF_I}, m.rank FROM (SELECT n.item_id, sum(w.weight) AS rank "
    "FROM unnest(%(names)s::text[], %(weights)s::float8[]) AS w(name, weight) "
    "JOIN ks_item_names n ON n.namespace_id = %(ns)s AND n.name = w.name GROUP BY n.item_id "
    "ORDER BY rank DESC, n.item_id LIMIT %(n)s + CASE WHEN %(exclude)s THEN (SELECT count(*) FROM ks_items h "
    "WHERE h.namespace_id = %(ns)s AND h.state = 'hot') ELSE 0 END) AS m "
    "JOIN ks_items i ON i.id = m.item_id WHERE NOT (%(exclude)s AND i.state = 'hot') "
    "ORDER BY m.rank DESC, m.item_id LIMIT %(n)s"
)

# The ledger of what a retrieval showed (one row per episode round, one per item shown in it).
DELETE_RETRIEVAL = "DELETE FROM ks_retrievals WHERE namespace_id = %s AND episode_id = %s AND round = %s"
INSERT_RETRIEVAL = "INSERT INTO ks_retrievals (namespace_id, episode_id, round, hot_version) VALUES (%s, %s, %s, %s)"
INSERT_RETRIEVAL_ITEMS = (
    "INSERT INTO ks_retrieval_items (namespace_id, episode_id, round, item_id, tier) "
    "SELECT %s, %s, %s, s.id, s.tier FROM unnest(%s::bigint[], %s::text[]) AS s(id, tier)"
)
RETRIEVALS_OF_EPISODE = (
    "SELECT r.round, r.hot_version, i.item_id, i.tier FROM ks_retrievals r LEFT JOIN ks_retrieval_items i "
    "USING (namespace_id, episode_id, round) WHERE r.namespace_id = %s AND r.episode_id = %s"
)
DELETE_RETRIEVALS_OF_EPISODE = "DELETE FROM ks_retrievals WHERE namespace_id = %s AND episode_id = %s"
# The ledgers of episodes abandoned before their commit: every retrieval older than %(age)s. Found through
# (namespace_id, shown_at), so when there is none (the usual case) this reads one index page.
DELETE_ABANDONED_RETRIEVALS = (
    "DELETE FROM ks_retrievals r WHERE r.namespace_id = %(ns)s AND r.episode_id IN ("
    "SELECT episode_id FROM ks_retrievals WHERE namespace_id = %(ns)s AND shown_at < now() - %(age)s) "
    "AND NOT EXISTS (SELECT 1 FROM ks_retrievals n WHERE n.namespace_id = r.namespace_id "
    "AND n.episode_id = r.episode_id AND n.shown_at >= now() - %(age)s)"
)

# -- the episode commit -----------------------------------------------------------------------------

EPISODE_SCORE = "SELECT terminal_score FROM ks_episodes WHERE namespace_id = %s AND episode_id = %s"
EPISODE_CREDITS = (
    "SELECT item_id, credit, utility_before, utility_after FROM ks_credits "
    "WHERE namespace_id = %s AND episode_id = %s"
)
EPISODE_NEW_ITEMS = "SELECT id FROM ks_items WHERE namespace_id = %s AND source_episode = %s ORDER BY id"
INSERT_EPISODE = (
    "INSERT INTO ks_episodes (namespace_id, episode_id, seq, policy, operator, level, t_first, t_best, "
    "terminal_score, hot_version_seen, rounds, metadata, params) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
INSERT_EXPOSURES = (  # one statement, array parameters (pipeline mode), rows in array order
    "INSERT INTO ks_exposures (namespace_id, episode_id, item_id, round, tier, stage, relevance, score, adopted, "
    "rationale) SELECT %s, %s, e.* FROM unnest(%s::bigint[], %s::int[], %s::text[], %s::text[], "
    "%s::float8[], %s::float8[], %s::bool[], %s::text[]) AS e"
)
UPDATE_STATISTICS = (
    "UPDATE ks_items AS t SET utility = u.utility, n_ret = u.n_ret, n_ret_cold = u.n_ret_cold, "
    "n_ado = u.n_ado, adopting_ops = ARRAY(SELECT jsonb_array_elements_text(u.ops)), access = u.access, "
    "q_draft = u.q_draft, q_refine = u.q_refine, updated_at = now() "
    "FROM unnest(%s::bigint[], %s::float8[], %s::int[], %s::int[], %s::int[], %s::jsonb[], %s::float8[], "
    "%s::float8[], %s::float8[]) AS u(id, utility, n_ret, n_ret_cold, n_ado, ops, access, q_draft, q_refine) "
    "WHERE t.id = u.id"
)
INSERT_CREDITS = (  # one statement, array parameters (pipeline mode), rows in array order
    "INSERT INTO ks_credits (namespace_id, episode_id, item_id, credit, utility_before, utility_after) "
    "SELECT %s, %s, c.* FROM unnest(%s::bigint[], %s::float8[], %s::float8[], %s::float8[]) AS c"
)
EPISODE = (
    "SELECT episode_id, operator, level, policy, t_first, t_best, hot_version_seen, rounds, metadata "
    "FROM ks_episodes WHERE namespace_id = %s AND episode_id = %s"
)
EPISODE_EXPOSURES = (
    "SELECT item_id, round, tier, stage, relevance, score, adopted, rationale FROM ks_exposures "
    "WHERE namespace_id = %s AND episode_id = %s ORDER BY round, item_id"
)

# -- consolidation ----------------------------------------------------------------------------------

# Arrays of thousands of ids, states and priorities travel in binary (%b): dumping them as text took longer than
# the statements that read them.

CONSOLIDATION_LOCK = "SELECT pg_advisory_lock(%s, %s)"
CONSOLIDATION_UNLOCK = "SELECT pg_advisory_unlock(%s, %s)"
SET_METADATA = "UPDATE ks_items SET metadata = %s, updated_at = now() WHERE id = %s"
SET_STATES = (
    "UPDATE ks_items AS t SET state = c.state, updated_at = now() "
    "FROM unnest(%b::bigint[], %b::text[]) AS c(id, state) WHERE t.id = c.id"
)
SET_RULES = (
    "UPDATE ks_items AS t SET rule_text = r.text, rule_tokens = r.tokens, abstracted_at = now(), "
    "updated_at = now() FROM unnest(%s::bigint[], %s::text[], %s::int[]) AS r(id, text, tokens) "
    "WHERE t.id = r.id"
)
# Promotion and demotion change the state alone: residency is ks_items.state, which the vector search filters by
# its join (nearest_items), so a flip rewrites no vector row and no vector index entry. The rows are found
# through the primary key (`id = ANY`); a join on the unnested arrays alone hashed the whole table first.
PROMOTE = (
    "UPDATE ks_items AS t SET state = 'hot', access = p.access, promoted_at = now(), updated_at = now(), "
    "eligible_banked = t.eligible_banked + (%(seq)s - COALESCE(t.eligible_since, %(seq)s)), eligible_since = NULL "
    "FROM unnest(%(ids)b::bigint[], %(access)b::float8[]) AS p(id, access) "
    "WHERE t.id = p.id AND t.id = ANY(%(ids)b::bigint[])"
)
DEMOTE = (
    "UPDATE ks_items SET state = 'validated', eligible_since = %s, demoted_at = now(), updated_at = now() "
    "WHERE id = ANY(%b::bigint[])"
)
INSERT_HOT_EVENTS = (
    "INSERT INTO ks_hot_events (namespace_id, hot_version, item_id, event, priority) "
    "SELECT %s, %s, e.id, e.event, e.priority FROM unnest(%b::bigint[], %b::text[], %b::float8[]) "
    "AS e(id, event, priority)"
)

# -- statistics -------------------------------------------------------------------------------------

SNAPSHOT = (
    "SELECT state, kind, utility, COALESCE(rule_tokens, tokens) AS tokens FROM ks_items "
    "WHERE namespace_id = %s ORDER BY id"
)
COUNT_BY_STATE = "SELECT state, count(*) AS n FROM ks_items WHERE namespace_id = %s GROUP BY state"
COUNT_BY_PROVENANCE = (
    "SELECT metadata->>'provenance' AS declared, kind, source_episode IS NOT NULL AS from_episode, count(*) AS n "
    "FROM ks_items WHERE namespace_id = %s GROUP BY 1, 2, 3"
)
ITEM_SUMMARY = (
    "SELECT count(*) AS items, avg(utility) AS mean_utility, "
    "coalesce(sum(COALESCE(rule_tokens, tokens)) FILTER (WHERE state = 'hot'), 0) AS hot_tokens, "
    "coalesce(sum(n_ado), 0) AS adoptions, coalesce(sum(n_ret), 0) AS exposures "
    "FROM ks_items WHERE namespace_id = %s"
)
LAST_EPISODE_PARAMS = "SELECT params FROM ks_episodes WHERE namespace_id = %s ORDER BY seq DESC LIMIT 1"
EPISODE_SUMMARY = (
    "SELECT count(*) AS n, count(*) FILTER (WHERE t_first IS NOT NULL) AS solved "
    "FROM ks_episodes WHERE namespace_id = %s"
)

# -- transfer ---------------------------------------------------------------------------------------

EXPORT_TABLES: tuple[tuple[str, str, str], ...] = (
    # (record type, table, order) — items first: the rest refers to them by their exported id
    ("item", "ks_items", "id"),
    ("episode", "ks_episodes", "seq, episode_id"),
    ("exposure", "ks_exposures", "episode_id, round, item_id"),
    ("credit", "ks_credits", "episode_id, item_id"),
    ("hot_event", "ks_hot_events", "hot_version, item_id, event"),
)
EXPORT_ITEMS = (
    "SELECT i.*, v.embedding FROM ks_items i JOIN ks_item_vectors v ON v.item_id = i.id "
    "WHERE i.namespace_id = %s ORDER BY i.id"
)
INSERT_ITEM_VECTOR = "INSERT INTO ks_item_vectors (item_id, namespace_id, embedding) VALUES (%s, %s, %s)"


# -- composed statements: identifiers that vary -----------------------------------------------------


VECTOR_INDEX_FAMILY = "ks_item_vectors_ivf_ns"  # every namespace's vector indexes start so
_VECTOR_INDEX_PREFIX = VECTOR_INDEX_FAMILY + "{}_l"  # + the number of lists it was built with


def vector_index_prefix(namespace_id: int) -> str:
    """The start of the names of a namespace's vector indexes."""
    return _VECTOR_INDEX_PREFIX.format(namespace_id)


def vector_index_name(namespace_id: int, lists: int) -> str:
    return f"{vector_index_prefix(namespace_id)}{lists}"


def create_vector_index(namespace_id: int, dim: int, lists: int = 1, *, concurrently: bool = False) -> sql.Composed:
    """The namespace's partial IVFFlat index (cosine): a search never sees another namespace's vectors.

    With one list (how a namespace starts) a search reads every vector of the namespace: exact search.
    vector_index.maintain rebuilds it with more lists as the namespace grows (see docs/memory.md).
    """
    return sql.SQL(
        "CREATE INDEX {how} IF NOT EXISTS {index} ON ks_item_vectors USING ivfflat "
        "((embedding::vector({dim})) vector_cosine_ops) WITH (lists = {lists}) WHERE namespace_id = {ns}"
    ).format(how=sql.SQL("CONCURRENTLY") if concurrently else sql.SQL(""),
             index=sql.Identifier(vector_index_name(namespace_id, lists)), dim=sql.Literal(dim),
             lists=sql.Literal(lists), ns=sql.Literal(namespace_id))


def drop_index_concurrently(name: str) -> sql.Composed:
    return sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name))


# A namespace's vector indexes with their lists and whether they are usable (a build cut short leaves an
# invalid one behind); parameters: vector_index_prefix and the name just past every name it starts (a range
# the catalog's name index finds: the automatic probes read this before every search).
VECTOR_INDEXES = (
    "SELECT c.relname AS name, i.indisvalid AS valid, "
    "substring(c.relname FROM '_l([0-9]+)$')::int AS lists FROM pg_class c "
    "JOIN pg_index i ON i.indexrelid = c.oid WHERE c.relname >= %(prefix)s AND c.relname < %(past)s "
    "AND starts_with(c.relname, %(prefix)s)"
)
# Vector indexes whose namespace is gone (a delete leaves its indexes to be dropped concurrently after it).
ORPHANED_VECTOR_INDEXES = (
    "SELECT c.relname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
    "WHERE starts_with(c.relname, %s) AND NOT EXISTS (SELECT 1 FROM ks_namespaces n "
    "WHERE n.id = substring(c.relname FROM '_ns([0-9]+)_l')::bigint)"
)
VECTOR_INDEX_LOCK = "SELECT pg_try_advisory_lock(%s, %s) AS locked"
# The same lock until the transaction ends: a creating transaction's turn to build a one-list index.
VECTOR_INDEX_XACT_LOCK = "SELECT pg_try_advisory_xact_lock(%s, %s) AS locked"
VECTOR_INDEX_UNLOCK = "SELECT pg_advisory_unlock(%s, %s)"


def nearest_items(namespace_id: int, dim: int, *, exclude_resident: bool) -> sql.Composed:
    """The items nearest to %(q)s, at most %(n)s, with their cosine similarity as `relevance`.

    Dimension and namespace are literals so the planner matches the namespace's partial index. With
    `exclude_resident` the hot rules are left out by their state in ks_items, joined row by row to the
    index scan's rows (one primary-key lookup each, which the item's columns need anyway): residency lives
    on the item alone, so promoting or demoting a rule never rewrites its vector row.
    """
    column = sql.SQL("v.embedding::vector({})").format(sql.Literal(dim))
    return sql.SQL(
        "SELECT {cols}, 1 - ({column} <=> %(q)s) AS relevance FROM ks_item_vectors v "
        "JOIN ks_items i ON i.id = v.item_id WHERE v.namespace_id = {ns} {resident} "
        "ORDER BY {column} <=> %(q)s LIMIT %(n)s"
    ).format(
        cols=sql.SQL(_ITEM_COLUMNS_OF_I), column=column, ns=sql.Literal(namespace_id),
        resident=sql.SQL("AND i.state <> 'hot'") if exclude_resident else sql.SQL(""),
    )


def nearest_experiences(namespace_id: int, dim: int) -> sql.Composed:
    """The experiences nearest to %(q)s (at most %(n)s, residents included) with text, operator, metadata and
    embedding: what a new experience may merge into (dedup.py)."""
    column = sql.SQL("embedding::vector({})").format(sql.Literal(dim))
    return sql.SQL(
        "SELECT i.id, i.text, i.operator, i.metadata, n.embedding FROM (SELECT item_id, embedding FROM "
        "ks_item_vectors WHERE namespace_id = {ns} ORDER BY {column} <=> %(q)s LIMIT %(n)s) AS n "
        "JOIN ks_items i ON i.id = n.item_id WHERE i.kind = 'experience'"
    ).format(column=column, ns=sql.Literal(namespace_id))


def export_rows(table: str, order: str) -> sql.Composed:
    """Every row of one of EXPORT_TABLES for namespace %s; `table` and `order` come from that constant."""
    return sql.SQL("SELECT * FROM {} WHERE namespace_id = %s ORDER BY {}").format(
        sql.Identifier(table), sql.SQL(order))  # type: ignore[arg-type]  # fixed text of EXPORT_TABLES


def insert_row(table: str, columns: list[str]) -> sql.Composed:
    """INSERT of one row into `table` with these columns, all values as placeholders."""
    return sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        sql.Identifier(table),
        sql.SQL(", ").join(map(sql.Identifier, columns)),
        sql.SQL(", ").join(sql.Placeholder() * len(columns)),
    )
