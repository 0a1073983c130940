"""Party nodes and fit sessions of seller-custody vertical markets.

Revision ID: 0007_party_nodes
Revises: 0006_report_rounds
Create Date: 2026-11-26 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = '0007_party_nodes'
down_revision: str | None = '0006_report_rounds'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'party_node',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('market_id', sa.Integer(), nullable=False),
        sa.Column('seller_id', sa.Integer(), nullable=False),
        sa.Column('party', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('host', sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column('port', sa.Integer(), nullable=False),
        sa.Column('features', sa.JSON(), nullable=False),
        sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('last_session_id', sa.Integer(), nullable=True),
        sa.Column('last_session_status', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['market_id'], ['market.id'], name=op.f('fk_party_node_market_id_market')),
        sa.ForeignKeyConstraint(['seller_id'], ['account.id'], name=op.f('fk_party_node_seller_id_account')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_party_node')),
        sa.UniqueConstraint('market_id', 'party', name=op.f('uq_party_node_market_id_party')),
    )
    with op.batch_alter_table('party_node', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_party_node_market_id'), ['market_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_party_node_seller_id'), ['seller_id'], unique=False)
    op.create_table(
        'fit_session',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('order_id', sa.Integer(), nullable=False),
        sa.Column('market_id', sa.Integer(), nullable=False),
        sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('plan', sa.JSON(), nullable=False),
        sa.Column('addresses', sa.JSON(), nullable=False),
        sa.Column('tls', sa.Boolean(), nullable=False),
        sa.Column('deadline_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['market_id'], ['market.id'], name=op.f('fk_fit_session_market_id_market')),
        sa.ForeignKeyConstraint(['order_id'], ['order.id'], name=op.f('fk_fit_session_order_id_order')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_fit_session')),
    )
    with op.batch_alter_table('fit_session', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_fit_session_market_id'), ['market_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_fit_session_order_id'), ['order_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_fit_session_status'), ['status'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('fit_session', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_fit_session_status'))
        batch_op.drop_index(batch_op.f('ix_fit_session_order_id'))
        batch_op.drop_index(batch_op.f('ix_fit_session_market_id'))
    op.drop_table('fit_session')
    with op.batch_alter_table('party_node', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_party_node_seller_id'))
        batch_op.drop_index(batch_op.f('ix_party_node_market_id'))
    op.drop_table('party_node')
