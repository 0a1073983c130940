"""Initial schema: accounts, markets, parameters, offers, orders, jobs, allocations, ledger.

Revision ID: 0001
Revises:
Create Date: 2026-11-21 12:09:42.604297
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('account',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('role', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('key_prefix', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
    sa.Column('key_hash', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("role IN ('admin', 'seller', 'buyer')", name=op.f('ck_account_role')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_account'))
    )
    with op.batch_alter_table('account', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_account_key_prefix'), ['key_prefix'], unique=True)

    op.create_table('market',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('task', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
    sa.Column('features', sa.JSON(), nullable=False),
    sa.Column('target', sa.JSON(), nullable=True),
    sa.Column('out_of_bounds', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('cost_prior', sa.JSON(), nullable=False),
    sa.Column('lifetime_epsilon_cap', sa.Float(), nullable=False),
    sa.Column('validation', sa.JSON(), nullable=True),
    sa.Column('created_by', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['created_by'], ['account.id'], name=op.f('fk_market_created_by_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_market'))
    )
    op.create_table('job',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
    sa.Column('market_id', sa.Integer(), nullable=True),
    sa.Column('created_by', sa.Integer(), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('progress_stage', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('progress_fraction', sa.Float(), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('lease_owner', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['created_by'], ['account.id'], name=op.f('fk_job_created_by_account')),
    sa.ForeignKeyConstraint(['market_id'], ['market.id'], name=op.f('fk_job_market_id_market')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_job'))
    )
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_job_market_id'), ['market_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_job_status'), ['status'], unique=False)

    op.create_table('market_parameters',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('market_id', sa.Integer(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('values', sa.JSON(), nullable=False),
    sa.Column('created_by', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['created_by'], ['account.id'], name=op.f('fk_market_parameters_created_by_account')),
    sa.ForeignKeyConstraint(['market_id'], ['market.id'], name=op.f('fk_market_parameters_market_id_market')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_market_parameters')),
    sa.UniqueConstraint('market_id', 'version', name=op.f('uq_market_parameters_market_id_version'))
    )
    with op.batch_alter_table('market_parameters', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_market_parameters_market_id'), ['market_id'], unique=False)

    op.create_table('offer',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('market_id', sa.Integer(), nullable=False),
    sa.Column('seller_id', sa.Integer(), nullable=False),
    sa.Column('records', sa.JSON(), nullable=False),
    sa.Column('records_scaled', sa.JSON(), nullable=False),
    sa.Column('n_records', sa.Integer(), nullable=False),
    sa.Column('reported_cost', sa.Float(), nullable=False),
    sa.Column('max_epsilon', sa.Float(), nullable=True),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('replaces_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['market_id'], ['market.id'], name=op.f('fk_offer_market_id_market')),
    sa.ForeignKeyConstraint(['replaces_id'], ['offer.id'], name=op.f('fk_offer_replaces_id_offer')),
    sa.ForeignKeyConstraint(['seller_id'], ['account.id'], name=op.f('fk_offer_seller_id_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_offer'))
    )
    with op.batch_alter_table('offer', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_offer_market_id'), ['market_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_offer_seller_id'), ['seller_id'], unique=False)
        batch_op.create_index('uq_offer_active_seller_market', ['market_id', 'seller_id'], unique=True, sqlite_where=sa.text("status = 'active'"), postgresql_where=sa.text("status = 'active'"))

    op.create_table('order',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('market_id', sa.Integer(), nullable=False),
    sa.Column('buyer_id', sa.Integer(), nullable=False),
    sa.Column('learner', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('budget_minor', sa.BigInteger(), nullable=False),
    sa.Column('gamma', sa.Float(), nullable=True),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('parameters_id', sa.Integer(), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('progress_stage', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('progress_fraction', sa.Float(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('summary', sa.JSON(), nullable=True),
    sa.Column('model', sa.JSON(), nullable=True),
    sa.Column('offer_ids', sa.JSON(), nullable=True),
    sa.Column('idempotency_key', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=True),
    sa.Column('request_hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('lease_owner', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['buyer_id'], ['account.id'], name=op.f('fk_order_buyer_id_account')),
    sa.ForeignKeyConstraint(['market_id'], ['market.id'], name=op.f('fk_order_market_id_market')),
    sa.ForeignKeyConstraint(['parameters_id'], ['market_parameters.id'], name=op.f('fk_order_parameters_id_market_parameters')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_order')),
    sa.UniqueConstraint('buyer_id', 'idempotency_key', name=op.f('uq_order_buyer_id_idempotency_key'))
    )
    with op.batch_alter_table('order', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_order_buyer_id'), ['buyer_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_order_market_id'), ['market_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_order_status'), ['status'], unique=False)

    op.create_table('allocation',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('order_id', sa.Integer(), nullable=False),
    sa.Column('seller_id', sa.Integer(), nullable=False),
    sa.Column('offer_id', sa.Integer(), nullable=False),
    sa.Column('epsilon', sa.Float(), nullable=False),
    sa.Column('payment_minor', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['offer_id'], ['offer.id'], name=op.f('fk_allocation_offer_id_offer')),
    sa.ForeignKeyConstraint(['order_id'], ['order.id'], name=op.f('fk_allocation_order_id_order')),
    sa.ForeignKeyConstraint(['seller_id'], ['account.id'], name=op.f('fk_allocation_seller_id_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_allocation')),
    sa.UniqueConstraint('order_id', 'seller_id', name=op.f('uq_allocation_order_id_seller_id'))
    )
    with op.batch_alter_table('allocation', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_allocation_order_id'), ['order_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_allocation_seller_id'), ['seller_id'], unique=False)

    op.create_table('ledger_entry',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('account_id', sa.Integer(), nullable=False),
    sa.Column('market_id', sa.Integer(), nullable=True),
    sa.Column('order_id', sa.Integer(), nullable=True),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('amount_minor', sa.BigInteger(), nullable=True),
    sa.Column('epsilon', sa.Float(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("(kind = 'money' AND amount_minor IS NOT NULL AND epsilon IS NULL) OR (kind = 'epsilon' AND epsilon IS NOT NULL AND amount_minor IS NULL)", name=op.f('ck_ledger_entry_amount_matches_kind')),
    sa.ForeignKeyConstraint(['account_id'], ['account.id'], name=op.f('fk_ledger_entry_account_id_account')),
    sa.ForeignKeyConstraint(['market_id'], ['market.id'], name=op.f('fk_ledger_entry_market_id_market')),
    sa.ForeignKeyConstraint(['order_id'], ['order.id'], name=op.f('fk_ledger_entry_order_id_order')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_ledger_entry'))
    )
    with op.batch_alter_table('ledger_entry', schema=None) as batch_op:
        batch_op.create_index('ix_ledger_entry_account_market_kind', ['account_id', 'market_id', 'kind'], unique=False)
        batch_op.create_index(batch_op.f('ix_ledger_entry_order_id'), ['order_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('ledger_entry', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_ledger_entry_order_id'))
        batch_op.drop_index('ix_ledger_entry_account_market_kind')

    op.drop_table('ledger_entry')
    with op.batch_alter_table('allocation', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_allocation_seller_id'))
        batch_op.drop_index(batch_op.f('ix_allocation_order_id'))

    op.drop_table('allocation')
    with op.batch_alter_table('order', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_order_status'))
        batch_op.drop_index(batch_op.f('ix_order_market_id'))
        batch_op.drop_index(batch_op.f('ix_order_buyer_id'))

    op.drop_table('order')
    with op.batch_alter_table('offer', schema=None) as batch_op:
        batch_op.drop_index('uq_offer_active_seller_market', sqlite_where=sa.text("status = 'active'"), postgresql_where=sa.text("status = 'active'"))
        batch_op.drop_index(batch_op.f('ix_offer_seller_id'))
        batch_op.drop_index(batch_op.f('ix_offer_market_id'))

    op.drop_table('offer')
    with op.batch_alter_table('market_parameters', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_market_parameters_market_id'))

    op.drop_table('market_parameters')
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_job_status'))
        batch_op.drop_index(batch_op.f('ix_job_market_id'))

    op.drop_table('job')
    op.drop_table('market')
    with op.batch_alter_table('account', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_account_key_prefix'))

    op.drop_table('account')
