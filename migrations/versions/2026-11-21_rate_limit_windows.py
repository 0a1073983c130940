"""Rate limits: fixed-window request counters shared by all processes.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 15:28:14.459095
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('rate_limit_window',
    sa.Column('identity', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
    sa.Column('route_group', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
    sa.Column('window_start', sa.BigInteger(), nullable=False),
    sa.Column('hits', sa.Integer(), nullable=False),
    sa.Column('expires_at', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('identity', 'route_group', 'window_start', name=op.f('pk_rate_limit_window'))
    )
    with op.batch_alter_table('rate_limit_window', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_rate_limit_window_expires_at'), ['expires_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('rate_limit_window', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_rate_limit_window_expires_at'))

    op.drop_table('rate_limit_window')
