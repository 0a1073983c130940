"""Vertical markets: market partition, record key and parties; offer party.

Revision ID: 0004_issue13
Revises: 0003
Create Date: 2026-11-23 17:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = '0004_issue13'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('market', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('partition', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False, server_default='horizontal')
        )
        batch_op.add_column(sa.Column('record_key', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True))
        batch_op.add_column(sa.Column('parties', sa.JSON(), nullable=True))
    with op.batch_alter_table('offer', schema=None) as batch_op:
        batch_op.add_column(sa.Column('party', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('offer', schema=None) as batch_op:
        batch_op.drop_column('party')
    with op.batch_alter_table('market', schema=None) as batch_op:
        batch_op.drop_column('parties')
        batch_op.drop_column('record_key')
        batch_op.drop_column('partition')
