"""Seller custody: who holds a market's records (``platform`` or ``seller``).

Revision ID: 0005_custody
Revises: 0004_issue13
Create Date: 2026-11-26 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = '0005_custody'
down_revision: str | None = '0004_issue13'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('market', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('custody', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False, server_default='platform')
        )


def downgrade() -> None:
    with op.batch_alter_table('market', schema=None) as batch_op:
        batch_op.drop_column('custody')
