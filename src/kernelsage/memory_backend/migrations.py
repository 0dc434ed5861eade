"""The schema of the memory as numbered migrations (SQL text only; schema.py applies them).

A migration is never edited once released: a change to the schema is a new, higher version.
"""

from __future__ import annotations

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "namespaces, items, episodes, exposures, credits, hot-memory history",
        """
        CREATE TABLE ks_namespaces (
            id serial PRIMARY KEY,
            name text NOT NULL UNIQUE,
            embedding_dim int NOT NULL CHECK (embedding_dim BETWEEN 1 AND 2000),
            embedding_model text NOT NULL,
            episode_seq bigint NOT NULL DEFAULT 0,
            hot_version bigint NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE ks_items (
            id bigserial PRIMARY KEY,
            namespace_id int NOT NULL REFERENCES ks_namespaces(id) ON DELETE CASCADE,
            kind text NOT NULL DEFAULT 'experience',
            text text NOT NULL,
            evidence text NOT NULL DEFAULT '',
            code_example text,
            operator text,
            source_episode text,
            tokens int NOT NULL CHECK (tokens > 0),
            rule_text text,
            rule_tokens int CHECK (rule_tokens > 0),
            abstracted_at timestamptz,
            utility double precision NOT NULL DEFAULT 0,
            n_ret int NOT NULL DEFAULT 0,
            n_ret_cold int NOT NULL DEFAULT 0,
            n_ado int NOT NULL DEFAULT 0,
            adopting_ops text[] NOT NULL DEFAULT '{}',
            access double precision NOT NULL DEFAULT 0,
            q_draft double precision NOT NULL DEFAULT 0,
            q_refine double precision NOT NULL DEFAULT 0,
            state text NOT NULL DEFAULT 'cold' CHECK (state IN ('cold', 'validated', 'hot')),
            eligible_banked bigint NOT NULL DEFAULT 0,
            eligible_since bigint,
            metadata jsonb NOT NULL DEFAULT '{}',
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            promoted_at timestamptz,
            demoted_at timestamptz
        );
        -- Statistics change after every episode, so leave room on each page for HOT updates.
        ALTER TABLE ks_items SET (fillfactor = 85);
        CREATE INDEX ks_items_namespace_state ON ks_items (namespace_id, state);
        -- Vectors live apart from the statistics: an episode commit never touches an HNSW index.
        -- `resident` mirrors state = 'hot' (changed only on promotion and demotion) so the
        -- filtered vector search needs no join.
        CREATE TABLE ks_item_vectors (
            item_id bigint PRIMARY KEY REFERENCES ks_items(id) ON DELETE CASCADE,
            namespace_id int NOT NULL REFERENCES ks_namespaces(id) ON DELETE CASCADE,
            resident boolean NOT NULL DEFAULT false,
            embedding vector NOT NULL
        );
        CREATE TABLE ks_episodes (
            namespace_id int NOT NULL REFERENCES ks_namespaces(id) ON DELETE CASCADE,
            episode_id text NOT NULL,
            seq bigint NOT NULL,
            policy text NOT NULL,
            operator text NOT NULL,
            level int,
            t_first double precision,
            t_best double precision,
            terminal_score double precision NOT NULL,
            hot_version_seen bigint,
            rounds jsonb NOT NULL DEFAULT '[]',
            metadata jsonb NOT NULL DEFAULT '{}',
            committed_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (namespace_id, episode_id)
        );
        CREATE TABLE ks_exposures (
            namespace_id int NOT NULL,
            episode_id text NOT NULL,
            item_id bigint NOT NULL REFERENCES ks_items(id) ON DELETE CASCADE,
            round int NOT NULL,
            tier text NOT NULL CHECK (tier IN ('hot', 'cold')),
            stage text NOT NULL CHECK (stage IN ('draft', 'refine')),
            relevance double precision,
            score double precision,
            adopted boolean NOT NULL,
            rationale text NOT NULL DEFAULT '',
            PRIMARY KEY (namespace_id, episode_id, item_id, round),
            FOREIGN KEY (namespace_id, episode_id) REFERENCES ks_episodes ON DELETE CASCADE
        );
        CREATE TABLE ks_credits (
            namespace_id int NOT NULL,
            episode_id text NOT NULL,
            item_id bigint NOT NULL REFERENCES ks_items(id) ON DELETE CASCADE,
            credit double precision NOT NULL,
            utility_before double precision NOT NULL,
            utility_after double precision NOT NULL,
            PRIMARY KEY (namespace_id, episode_id, item_id),
            FOREIGN KEY (namespace_id, episode_id) REFERENCES ks_episodes ON DELETE CASCADE
        );
        CREATE TABLE ks_hot_events (
            namespace_id int NOT NULL REFERENCES ks_namespaces(id) ON DELETE CASCADE,
            hot_version bigint NOT NULL,
            item_id bigint NOT NULL REFERENCES ks_items(id) ON DELETE CASCADE,
            event text NOT NULL CHECK (event IN ('promoted', 'demoted')),
            priority double precision,
            at timestamptz NOT NULL DEFAULT now()
        );
        """,
    ),
    (
        2,
        "retrieval ledger; the parameters each episode ran with",
        """
        -- What each retrieval of an episode round showed (the hot version it saw, each item and its tier):
        -- the episode commit is checked against it, then removes it (the exposures keep the record).
        CREATE TABLE ks_retrievals (
            namespace_id int NOT NULL REFERENCES ks_namespaces(id) ON DELETE CASCADE,
            episode_id text NOT NULL,
            round int NOT NULL,
            hot_version bigint NOT NULL,
            shown_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (namespace_id, episode_id, round)
        );
        CREATE TABLE ks_retrieval_items (
            namespace_id int NOT NULL,
            episode_id text NOT NULL,
            round int NOT NULL,
            item_id bigint NOT NULL REFERENCES ks_items(id) ON DELETE CASCADE,
            tier text NOT NULL CHECK (tier IN ('hot', 'cold')),
            PRIMARY KEY (namespace_id, episode_id, round, item_id),
            FOREIGN KEY (namespace_id, episode_id, round) REFERENCES ks_retrievals ON DELETE CASCADE
        );
        ALTER TABLE ks_episodes ADD COLUMN params jsonb NOT NULL DEFAULT '{}';
        """,
    ),
    (
        3,
        "IVFFlat vector indexes in place of HNSW; abandoned retrieval ledgers found by age; item references "
        "indexed",
        """
        -- HNSW lost most of its recall on well-separated clusters (docs/memory.md). Each namespace starts
        -- again with a one-list IVFFlat index (exact search); vector_index.maintain grows it at its next write.
        DO $$
        DECLARE r record;
        BEGIN
            FOR r IN SELECT id, embedding_dim FROM ks_namespaces LOOP
                EXECUTE format('DROP INDEX IF EXISTS %I', 'ks_item_vectors_hnsw_ns' || r.id);
                EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON ks_item_vectors USING ivfflat '
                               '((embedding::vector(%s)) vector_cosine_ops) WITH (lists = 1) '
                               'WHERE namespace_id = %s', 'ks_item_vectors_ivf_ns' || r.id || '_l1',
                               r.embedding_dim, r.id);
            END LOOP;
        END
        $$;
        CREATE INDEX ks_retrievals_shown_at ON ks_retrievals (namespace_id, shown_at);
        -- Deleting items cascades through every table that references them: without these, deleting a
        -- namespace scans each table once per item (minutes at 10,000 episodes).
        CREATE INDEX ks_exposures_item ON ks_exposures (item_id);
        CREATE INDEX ks_credits_item ON ks_credits (item_id);
        CREATE INDEX ks_hot_events_item ON ks_hot_events (item_id);
        CREATE INDEX ks_retrieval_items_item ON ks_retrieval_items (item_id);
        """,
    ),
    (
        4,
        "incremental consolidation: a consolidation epoch per namespace, episodes found by sequence",
        """
        -- Bumped by every consolidation that writes: a process's cached candidates are valid while it is
        -- the epoch they were read at (candidates.py). The episodes committed since a consolidation are
        -- found by their sequence number, their credited items by ks_credits' primary key.
        ALTER TABLE ks_namespaces ADD COLUMN ugc_epoch bigint NOT NULL DEFAULT 0;
        CREATE INDEX ks_episodes_seq ON ks_episodes (namespace_id, seq);
        """,
    ),
    (
        5,
        "lexical retrieval: each item's names (identifiers and words) as a tsvector, kept by triggers, GIN-indexed",
        """
        -- Kernel errors are named things (DataCopyPad, _mm256_fmadd_ps) that dense vectors rank poorly. The
        -- parser of every text search configuration splits identifiers at underscores, so an item's document
        -- is its words as whole lower-cased lexemes (hybrid.py builds queries the same way), without positions.
        CREATE FUNCTION ks_lexemes(doc text) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            SELECT array_to_tsvector(ARRAY(SELECT DISTINCT lower(m[1])
                                           FROM regexp_matches(doc, '([A-Za-z_][A-Za-z0-9_]*)', 'g') AS m))
        $$;
        -- What lexical retrieval reads of an item: text, evidence, code example and an error signature.
        CREATE FUNCTION ks_item_lexemes_of(text text, evidence text, code text, metadata jsonb) RETURNS tsvector
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            SELECT ks_lexemes(concat_ws(' ', text, evidence, code, metadata->>'error_signature'))
        $$;
        -- Apart from ks_items (as the vectors are): its rows are written when an item's text changes, never
        -- by the statistics updates of an episode commit, and exports of ks_items do not change.
        CREATE TABLE ks_item_lexemes (
            item_id bigint PRIMARY KEY REFERENCES ks_items(id) ON DELETE CASCADE,
            namespace_id int NOT NULL,
            lexemes tsvector NOT NULL
        );
        CREATE INDEX ks_item_lexemes_gin ON ks_item_lexemes USING gin (lexemes);
        INSERT INTO ks_item_lexemes (item_id, namespace_id, lexemes)
            SELECT id, namespace_id, ks_item_lexemes_of(text, evidence, code_example, metadata) FROM ks_items;
        -- One statement-level trigger per insert (COPY included): one INSERT ... SELECT for a whole batch.
        CREATE FUNCTION ks_items_lexemes_insert() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO ks_item_lexemes (item_id, namespace_id, lexemes)
                SELECT id, namespace_id, ks_item_lexemes_of(text, evidence, code_example, metadata) FROM new_items;
            RETURN NULL;
        END
        $$;
        CREATE TRIGGER ks_items_lexemes_insert AFTER INSERT ON ks_items REFERENCING NEW TABLE AS new_items
            FOR EACH STATEMENT EXECUTE FUNCTION ks_items_lexemes_insert();
        CREATE FUNCTION ks_items_lexemes_update() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE ks_item_lexemes SET lexemes = ks_item_lexemes_of(NEW.text, NEW.evidence, NEW.code_example,
                                                                    NEW.metadata)
                WHERE item_id = NEW.id;
            RETURN NULL;
        END
        $$;
        -- Row-level and only when the text read changes: statistics and metadata merges pass it by.
        CREATE TRIGGER ks_items_lexemes_update AFTER UPDATE OF text, evidence, code_example, metadata ON ks_items
            FOR EACH ROW WHEN (OLD.text IS DISTINCT FROM NEW.text OR OLD.evidence IS DISTINCT FROM NEW.evidence
                               OR OLD.code_example IS DISTINCT FROM NEW.code_example
                               OR OLD.metadata->>'error_signature' IS DISTINCT FROM NEW.metadata->>'error_signature')
            EXECUTE FUNCTION ks_items_lexemes_update();
        """,
    ),
    (
        6,
        "cheaper promotions and demotions: residency kept on the item alone, hot events without per-row key checks",
        """
        -- The flag mirrored ks_items.state = 'hot'. Each promotion or demotion rewrote the ~1.5 KB vector row and
        -- its index entries (most of a consolidation's time when it swaps hundreds of rules); the vector search
        -- now filters hot rules by the state of the item it joins (queries.nearest_items). Dropping a column
        -- rewrites nothing: existing rows keep their bytes until they are next written.
        ALTER TABLE ks_item_vectors DROP COLUMN resident;
        -- A hot event is written by consolidation for an item of the namespace it has just read and updated
        -- under the namespace lock (or by an import, which maps every item it refers to), and items are deleted
        -- only with their namespace. The foreign keys' checks, a locking lookup per event row for each key, cost
        -- more than the insert itself (59 of 68 ms for 1,700 events): the keys go, and deleting namespaces removes
        -- their events in one statement-level trigger, as the namespace key's cascade did. The item index served
        -- the item key's cascade only.
        ALTER TABLE ks_hot_events DROP CONSTRAINT IF EXISTS ks_hot_events_item_id_fkey;
        ALTER TABLE ks_hot_events DROP CONSTRAINT IF EXISTS ks_hot_events_namespace_id_fkey;
        DROP INDEX IF EXISTS ks_hot_events_item;
        CREATE FUNCTION ks_namespaces_delete_hot_events() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM ks_hot_events e USING deleted_namespaces d WHERE e.namespace_id = d.id;
            RETURN NULL;
        END
        $$;
        CREATE TRIGGER ks_namespaces_delete_hot_events AFTER DELETE ON ks_namespaces
            REFERENCING OLD TABLE AS deleted_namespaces FOR EACH STATEMENT
            EXECUTE FUNCTION ks_namespaces_delete_hot_events();
        """,
    ),
    (
        7,
        "lexical retrieval by a table of names keyed by namespace: a common name costs a bounded read",
        """
        -- Migration 5's GIN index had one posting list per word for the whole table: counting the items of one
        -- namespace that hold a common name (LocalTensor, float16) built the bitmap of every row holding it, in
        -- every namespace (20-80 ms at 120K items). A B-tree keyed (namespace, name, item) answers "does this
        -- namespace hold the name more than N times?" by reading N + 1 entries, and the items of a rare name by
        -- reading those alone. Only name-shaped words are kept, the words queries look up (hybrid.is_name:
        -- at least 3 characters with an underscore, a digit or a capital after the first), lower-cased.
        CREATE FUNCTION ks_names(doc text) RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            SELECT ARRAY(SELECT DISTINCT lower(m[1]) FROM regexp_matches(doc, '([A-Za-z_][A-Za-z0-9_]*)', 'g') AS m
                         WHERE length(m[1]) >= 3 AND (m[1] ~ '[_0-9]' OR substr(m[1], 2) ~ '[A-Z]'))
        $$;
        -- What lexical retrieval reads of an item: text, evidence, code example and an error signature.
        CREATE FUNCTION ks_item_names_of(text text, evidence text, code text, metadata jsonb) RETURNS text[]
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            SELECT ks_names(concat_ws(' ', text, evidence, code, metadata->>'error_signature'))
        $$;
        -- No foreign keys (a locking lookup per name row would cost more than the insert): items are deleted
        -- only with their namespace, whose deletion removes its names in one statement-level trigger.
        CREATE TABLE ks_item_names (
            namespace_id int NOT NULL,
            name text COLLATE "C" NOT NULL,
            item_id bigint NOT NULL,
            PRIMARY KEY (namespace_id, name, item_id)
        );
        INSERT INTO ks_item_names (namespace_id, name, item_id)
            SELECT i.namespace_id, n.name, i.id
            FROM ks_items i, unnest(ks_item_names_of(i.text, i.evidence, i.code_example, i.metadata)) AS n(name);
        CREATE FUNCTION ks_items_names_insert() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO ks_item_names (namespace_id, name, item_id)
                SELECT i.namespace_id, n.name, i.id
                FROM new_items i, unnest(ks_item_names_of(i.text, i.evidence, i.code_example, i.metadata)) AS n(name);
            RETURN NULL;
        END
        $$;
        CREATE TRIGGER ks_items_names_insert AFTER INSERT ON ks_items REFERENCING NEW TABLE AS new_items
            FOR EACH STATEMENT EXECUTE FUNCTION ks_items_names_insert();
        -- The old names are found by primary key (namespace, name, item), then the new ones written.
        CREATE FUNCTION ks_items_names_update() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM ks_item_names WHERE namespace_id = OLD.namespace_id AND item_id = OLD.id
                AND name = ANY(ks_item_names_of(OLD.text, OLD.evidence, OLD.code_example, OLD.metadata));
            INSERT INTO ks_item_names (namespace_id, name, item_id)
                SELECT NEW.namespace_id, n.name, NEW.id
                FROM unnest(ks_item_names_of(NEW.text, NEW.evidence, NEW.code_example, NEW.metadata)) AS n(name);
            RETURN NULL;
        END
        $$;
        CREATE TRIGGER ks_items_names_update AFTER UPDATE OF text, evidence, code_example, metadata ON ks_items
            FOR EACH ROW WHEN (OLD.text IS DISTINCT FROM NEW.text OR OLD.evidence IS DISTINCT FROM NEW.evidence
                               OR OLD.code_example IS DISTINCT FROM NEW.code_example
                               OR OLD.metadata->>'error_signature' IS DISTINCT FROM NEW.metadata->>'error_signature')
            EXECUTE FUNCTION ks_items_names_update();
        CREATE FUNCTION ks_namespaces_delete_names() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM ks_item_names n USING deleted_namespaces d WHERE n.namespace_id = d.id;
            RETURN NULL;
        END
        $$;
        CREATE TRIGGER ks_namespaces_delete_names AFTER DELETE ON ks_namespaces
            REFERENCING OLD TABLE AS deleted_namespaces FOR EACH STATEMENT
            EXECUTE FUNCTION ks_namespaces_delete_names();
        DROP TRIGGER ks_items_lexemes_insert ON ks_items;
        DROP TRIGGER ks_items_lexemes_update ON ks_items;
        DROP TABLE ks_item_lexemes;
        DROP FUNCTION ks_items_lexemes_insert(), ks_items_lexemes_update(),
            ks_item_lexemes_of(text, text, text, jsonb), ks_lexemes(text);
        """,
    ),
    (
        8,
        "names as kernel engineers write them: capitalised API words, dotted and qualified names, long ones by hash",
        r"""
        -- Single-word APIs (Muls, Exp, Cast) were not names, and `tl.dot` was split into `tl` and `dot`: a third
        -- of the error texts that name an Ascend or Triton API gained nothing. Names are now any word of at least
        -- 3 characters with an underscore, a digit or a capital (prose capitals, in many items, weigh nothing:
        -- hybrid.name_weights), and each dotted or qualified chain as a whole (`triton.language.` written `tl.`).
        -- A name longer than 128 bytes (a mangled C++ symbol from a linker log) is kept as the SHA-256 of its
        -- lower-cased text: the B-tree refuses entries over about 2,700 bytes, which lost the episode that wrote it.
        CREATE FUNCTION ks_name_key(name text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            SELECT CASE WHEN octet_length(name) > 128 THEN 'sha256:' || encode(sha256(convert_to(name, 'UTF8')), 'hex')
                        ELSE name END
        $$;
        CREATE OR REPLACE FUNCTION ks_names(doc text) RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            SELECT ARRAY(SELECT DISTINCT ks_name_key(lower(names.n)) FROM (
                SELECT regexp_replace(m[1], '^triton\.language\.', 'tl.') AS chain
                FROM regexp_matches(doc, '([A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_][A-Za-z0-9_]*)*)', 'g') AS m
            ) AS c, LATERAL (
                SELECT c.chain WHERE c.chain ~ '\.|::'
                UNION ALL
                SELECT p FROM regexp_split_to_table(c.chain, '\.|::') AS p WHERE length(p) >= 3 AND p ~ '[_0-9A-Z]'
            ) AS names(n))
        $$;
        TRUNCATE ks_item_names;
        INSERT INTO ks_item_names (namespace_id, name, item_id)
            SELECT i.namespace_id, n.name, i.id
            FROM ks_items i, unnest(ks_item_names_of(i.text, i.evidence, i.code_example, i.metadata)) AS n(name);
        """,
    ),
)

MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(%s, 0)"
CREATE_MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS ks_schema_migrations ("
    "version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
)
APPLIED_MIGRATIONS = "SELECT version FROM ks_schema_migrations ORDER BY version"
RECORD_MIGRATION = "INSERT INTO ks_schema_migrations (version, name) VALUES (%s, %s)"
